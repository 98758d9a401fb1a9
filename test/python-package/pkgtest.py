"""Helpers of the Python package's tests: running Python snippets with the
package from the source tree (PYTHONPATH=python), preloaded or not."""
import json
import os
import re
import subprocess
import sys
import textwrap

import faulthandler_text
import fltest

# The package under test, from the source tree: the snippets run with it on
# PYTHONPATH, and test_api.py imports it in-process.
PYTHONPATH = os.path.join(fltest.SOURCE, "python")
sys.path.insert(0, PYTHONPATH)
SYSTEM_PYTHON = "/usr/bin/python3"


def run_py(code, tmp_path, python=SYSTEM_PYTHON, preload=False, env=None, args=(), pyflags=(),
           timeout=120):
    """Runs `python code` (dedented) with the package importable; reports go
    to tmp_path/reports (also the current directory). Returns fltest's Run."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(code))
    reports = tmp_path / "reports"
    reports.mkdir(exist_ok=True)
    e = {"PYTHONPATH": PYTHONPATH, "FAULTLINE_LIB": fltest.LIB, "FAULTLINE_CLI": fltest.CLI,
         "FAULTLINE_DIR": str(reports), "PYTHONFAULTHANDLER": ""}
    e.update(env or {})
    return fltest.run([python, *pyflags, str(script), *args], preload=preload, env=e,
                      report_dir=str(reports), cwd=str(reports), timeout=timeout)


def python_frames(thread):
    return [(f["file"], f["line"], f["function"]) for f in thread["frames"] if f["kind"] == "python"]


def faulthandler_current(stderr):
    """The Python frames of faulthandler's 'Current thread' in stderr (3.14
    adds the thread's name: "Current thread 0x... [python3] (most ...")."""
    stderr = re.sub(r"^(Current thread|Thread) (0x[0-9a-f]+) \[.*\] \(", r"\1 \2 (", stderr,
                    flags=re.M)
    threads = [t for t in faulthandler_text.parse(stderr) if t[0]]
    assert threads, stderr
    return threads[0][1]


def sentry_event(report_path):
    p = subprocess.run([fltest.CLI, "sentry", report_path], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)
