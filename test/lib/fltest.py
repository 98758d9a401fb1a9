"""Shared helpers for faultline's pytest suites: run a crashing process under
the preload, collect the report it wrote, validate it against the schema.

test/conftest.py puts this folder on sys.path: tests `import fltest`.
"""
import atexit
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile

SOURCE = os.environ.get("FAULTLINE_SOURCE", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(SOURCE, "build"))
LIB = os.environ.get("FAULTLINE_LIB", os.path.join(BUILD, "lib", "libfaultline.so"))
CLI = os.environ.get("FAULTLINE_CLI", os.path.join(BUILD, "bin", "faultline"))
PROGRAMS = os.path.join(BUILD, "test-programs")
SCHEMA = os.path.join(SOURCE, "schema", "faultline-1.schema.json")


# Report directories made by run(), removed when the test process ends
# (tests may look into them until then).
_made_dirs = []
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _made_dirs])


class Run:
    def __init__(self, returncode, stdout, stderr, reports, report_dir):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.reports = reports
        self.report_dir = report_dir

    @property
    def report(self):
        assert len(self.reports) == 1, f"expected one report, found {len(self.reports)}:\n{self.stderr}"
        return self.reports[0]

    @property
    def signal(self):
        """The signal that killed the process, or None."""
        return -self.returncode if self.returncode < 0 else None


def run(cmd, preload=True, env=None, report_dir=None, timeout=60, cwd=None, stdin=None):
    """Runs cmd (a list) with libfaultline.so preloaded; returns a Run with
    every report the process left in report_dir (a fresh temp dir by default)."""
    own_dir = report_dir is None
    if own_dir:
        report_dir = tempfile.mkdtemp(prefix="faultline-test-")
        _made_dirs.append(report_dir)
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    # The suite may choose the unwinder (ctest runs some suites twice, once
    # with FAULTLINE_UNWINDER=libunwind); every other setting comes from the test.
    suite_unwinder = os.environ.get("FAULTLINE_UNWINDER")
    for k in list(e):
        if k.startswith("FAULTLINE_") and k not in ("FAULTLINE_SOURCE", "FAULTLINE_BUILD", "FAULTLINE_LIB", "FAULTLINE_CLI",
                                                    "FAULTLINE_UNWINDER"):
            del e[k]
    if preload:
        e["LD_PRELOAD"] = LIB
        e["FAULTLINE_DIR"] = report_dir
    if env:
        e.update(env)
    p = subprocess.run(cmd, env=e, capture_output=True, timeout=timeout, cwd=cwd, input=stdin)
    reports = reports_in(report_dir)
    if suite_unwinder and preload and e.get("FAULTLINE_UNWINDER") == suite_unwinder:
        # A suite run for one unwinder must have used it, or it tests nothing new.
        for rep in reports:
            for t in rep.get("threads", []):
                if t.get("tid") == rep.get("crashed_tid") and t.get("frames"):
                    assert t.get("unwinder", "").startswith(suite_unwinder), (suite_unwinder, t.get("unwinder"))
    return Run(p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"),
               reports, report_dir)


def reports_in(report_dir):
    """The reports in report_dir, in the order of their names."""
    reports = []
    for path in sorted(glob.glob(os.path.join(report_dir, "faultline-*.json"))):
        with open(path, "rb") as f:
            reports.append(json.loads(f.read().decode("utf-8")))
    return reports


def listdir(d):
    """The entries of a report directory but the same-crash limit's state
    files (.faultline-limit-<signature>: one per signature, kept between
    crashes; doc/report-format.md#crash-loops)."""
    return [n for n in os.listdir(d) if not n.startswith(".faultline-limit-")]


def cli(*args, input=None, env=None, cwd=None, timeout=120, text=True, check=False):
    """Runs the `faultline` command; returns the CompletedProcess (str output
    with undecodable bytes replaced, or bytes with text=False), whatever its
    status unless check. NO_COLOR and DEBUGINFOD_URLS do not leak in from the
    caller's environment: tests that want them pass them in env."""
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e.pop("DEBUGINFOD_URLS", None)
    if env:
        e.update(env)
    decode = {"text": True, "errors": "replace"} if text else {}
    p = subprocess.run([CLI, *args], input=input, env=e, cwd=cwd, capture_output=True,
                       timeout=timeout, **decode)
    if check and p.returncode != 0:
        raise AssertionError(f"faultline {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p


def program(name):
    return os.path.join(PROGRAMS, name)


_schema = None


def validate(report):
    """Validates a report against schema/faultline-1.schema.json with Python's
    jsonschema (an implementation independent of faultline's own validator)."""
    global _schema
    import jsonschema
    if _schema is None:
        with open(SCHEMA) as f:
            _schema = json.load(f)
    jsonschema.validate(report, _schema)
    return report


def crashed_thread(report):
    ts = [t for t in report["threads"] if t.get("crashed")]
    assert len(ts) == 1, "exactly one crashed thread"
    return ts[0]


def native_symbols(thread):
    return [f.get("symbol") for f in thread["frames"] if f["kind"] == "native"]


def signum(name):
    return getattr(signal, name).value
