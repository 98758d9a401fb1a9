"""A Python job preloaded with faultline that crashes through ctypes: the
report's native frames go through the interpreter's eval loop."""
import glob
import os
import subprocess

import pytest

import fltest

JOB = """
import ctypes
def inner():
    ctypes.string_at(0)
def outer():
    inner()
outer()
"""


def interpreters():
    found = ["/usr/bin/python3"]
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip() or os.path.expanduser("~/.pyenv")
    for minor in ("3.9", "3.12"):
        found += sorted(glob.glob(os.path.join(root, "versions", minor + ".*", "bin", "python3")))[:1]
    return [p for p in found if os.path.exists(p)]


@pytest.mark.parametrize("python", interpreters())
def test_python_ctypes_crash(python):
    r = fltest.run([python, "-c", JOB])
    base = fltest.run([python, "-c", JOB], preload=False)
    assert r.returncode == base.returncode == -11
    rep = fltest.validate(r.report)
    t = fltest.crashed_thread(rep)
    syms = [s or "" for s in fltest.native_symbols(t)]
    assert any("EvalFrame" in s for s in syms), syms
    assert any(s.startswith("ffi_call") for s in syms), syms
    assert rep["process"]["argv"][0] == python
    # The interpreter's own frames are labelled as CPython.
    origins = {f["origin"] for f in t["frames"] if "EvalFrame" in (f.get("symbol") or "")}
    assert origins == {"cpython"}
