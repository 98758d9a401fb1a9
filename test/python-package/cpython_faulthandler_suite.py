"""Runs CPython's own test_faulthandler (the interpreter's Lib/test) against
faulthandler, or against faultline standing in for it, and prints each
test's outcome as JSON: {"test_name": "ok" | "FAIL" | "ERROR" | "skipped"}.

    python3 cpython_faulthandler_suite.py PYTHON faulthandler|faultline WORKDIR

For faultline, WORKDIR gets a virtual environment of PYTHON whose
site-packages holds the package (a path .pth) and a start-up .pth that puts
faultline's functions in the faulthandler module before anything uses it:
the suite's children run with -E, and faulthandler is a built-in module, so
neither PYTHONPATH nor a module on the path would reach them. Reports go
to WORKDIR/reports (FAULTLINE_DIR; the library reads it, -E or not).
Needs FAULTLINE_LIB (the library to load) in the environment."""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
# faulthandler's functions replaced by faultline's in the built-in module
# itself: the module stays in sys.modules (an extension module, as the
# suite's "Extension modules:" test expects).
SHIM = "import faultline; faultline._stand_in_for_faulthandler()\n"


def venv(python, where, shim):
    subprocess.run([python, "-m", "venv", "--without-pip", where], check=True)
    site = subprocess.run([os.path.join(where, "bin", "python"), "-c",
                           "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    if shim:
        # .pth files are read in name order: the path first, then the shim.
        with open(os.path.join(site, "faultline-a-path.pth"), "w") as f:
            f.write(PACKAGE + "\n")
        with open(os.path.join(site, "faultline-b-shim.pth"), "w") as f:
            f.write(SHIM)
    return os.path.join(where, "bin", "python")


def outcomes(text):
    """unittest -v's lines: 'test_x (test.test_faulthandler.Class[.test_x]) ... ok'."""
    result = {}
    for m in re.finditer(r"^(test_\w+) \([\w.]+\)(?:\n.*?)?\s\.\.\. ?(.*)$", text, re.M):
        word = m.group(2).strip()
        result[m.group(1)] = ("skipped" if word.startswith("skipped") else
                              "ok" if word == "ok" else
                              "FAIL" if word == "FAIL" else "ERROR")
    return result


def main():
    python, mode, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    exe = venv(python, os.path.join(work, "venv-" + mode), mode == "faultline")
    reports = os.path.join(work, "reports")
    os.makedirs(reports, exist_ok=True)
    env = dict(os.environ, FAULTLINE_DIR=reports, PYTHONFAULTHANDLER="", PYTHONDEVMODE="")
    env.pop("PYTHONPATH", None)
    p = subprocess.run([exe, "-m", "unittest", "-v", "test.test_faulthandler"], cwd=work,
                       env=env, capture_output=True, text=True, timeout=900)
    with open(os.path.join(work, mode + ".log"), "w") as f:
        f.write(p.stdout + p.stderr)
    print(json.dumps(outcomes(p.stderr), sort_keys=True))


if __name__ == "__main__":
    main()
