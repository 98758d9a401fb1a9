"""The interpreters the CPython walker is tested against, and helpers shared
by the tests that run them (test/python, test/python-package).

Interpreters: Debian's statically linked /usr/bin/python3.11 and the pyenv
builds 3.9-3.13 (shared libpython). A missing one fails the tests that need
it, unless FAULTLINE_PY_ALLOW_MISSING=1 (a machine without pyenv).
"""
import glob
import os
import re
import shutil
import subprocess

import pytest

import fltest

MINORS = ["3.9", "3.10", "3.11", "3.12", "3.13"]


def pyenv_root():
    root = os.environ.get("PYENV_ROOT")
    if not root and shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    return root or os.path.expanduser("~/.pyenv")


def pyenv_prefix(minor):
    found = sorted(glob.glob(os.path.join(pyenv_root(), "versions", minor + ".*")))
    found = [p for p in found if re.fullmatch(re.escape(minor) + r"\.\d+", os.path.basename(p))]
    return found[-1] if found else None


def interpreters():
    """(id, path) of every interpreter under test."""
    out = [("debian-3.11", "/usr/bin/python3.11")]
    for minor in MINORS:
        prefix = pyenv_prefix(minor)
        out.append(("pyenv-" + minor, os.path.join(prefix, "bin", "python3") if prefix else None))
    return out


def require(path):
    if path and os.path.exists(path):
        return path
    if os.environ.get("FAULTLINE_PY_ALLOW_MISSING") == "1":
        pytest.skip(f"interpreter not installed: {path}")
    pytest.fail(f"interpreter not installed: {path} (set FAULTLINE_PY_ALLOW_MISSING=1 to skip)")


def interpreter_params():
    return [pytest.param(p, id=i) for i, p in interpreters()]


def cc(args, cwd=None):
    p = subprocess.run(args, capture_output=True, text=True, cwd=cwd)
    assert p.returncode == 0, f"{' '.join(args)}\n{p.stderr}"


def python_threads(report):
    """Threads of a report that have Python frames, as lists of (file, line, function)."""
    out = []
    for t in report["threads"]:
        frames = [(f["file"], f["line"], f["function"]) for f in t["frames"] if f["kind"] == "python"]
        out.append((t, frames))
    return out


def crashed(report):
    return fltest.crashed_thread(report)
