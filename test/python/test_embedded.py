"""An embedding C++ program installs faultline, then dlopens a pyenv
libpython and runs Python code that crashes: the runtime is found at crash
time and the report has the Python frames."""
import os
import tempfile

import pytest

import fltest
import pyenvs

HERE = os.path.dirname(os.path.abspath(__file__))

CODE = """
import ctypes

def embedded_crash():
    ctypes.string_at(0)

embedded_crash()
"""


@pytest.mark.parametrize("minor", ["3.10", "3.12", "3.13"])
def test_dlopened_libpython(minor):
    prefix = pyenvs.pyenv_prefix(minor)
    pyenvs.require(prefix)
    libpython = os.path.join(prefix, "lib", f"libpython{minor}.so.1.0")
    d = tempfile.mkdtemp(prefix="faultline-embed-")
    exe = os.path.join(d, "embed")
    libdir = os.path.dirname(fltest.LIB)
    pyenvs.cc(["c++", "-O1", "-g", "-I", os.path.join(fltest.SOURCE, "include"), "-o", exe,
               os.path.join(HERE, "native", "embed.cpp"), fltest.LIB, "-ldl", "-Wl,-rpath," + libdir])
    r = fltest.run([exe, libpython, CODE], preload=False, report_dir=d, env={"PYTHONHOME": prefix, "FAULTLINE_DIR": d})
    rep = r.report
    fltest.validate(rep)
    assert rep["python"]["version"].startswith(minor)
    t = fltest.crashed_thread(rep)
    frames = [(f["file"], f["function"]) for f in t["frames"] if f["kind"] == "python"]
    assert frames[0][1] == "string_at"
    assert frames[1:] == [("<string>", "embedded_crash"), ("<string>", "<module>")]
