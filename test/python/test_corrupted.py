"""A corrupted interpreter: a C extension overwrites a frame's `previous`
pointer or its code object pointer, then crashes. The report is still
written, valid, keeps the frames read before the damage, and names what could
not be read."""
import os
import sysconfig
import tempfile

import pytest

import fltest
import pyenvs

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3.11"
HEADERS = "/usr/include/python3.11"

JOB = """
import sys
sys.path.insert(0, sys.argv[1])
import corrupt

def victim():
    corrupt.{mode}()

def caller():
    victim()

caller()
"""


@pytest.fixture(scope="module")
def ext_dir():
    pyenvs.require(PYTHON)
    if not os.path.exists(os.path.join(HEADERS, "internal", "pycore_frame.h")):
        pytest.fail("python3-dev (3.11 internal headers) not installed")
    d = tempfile.mkdtemp(prefix="faultline-corrupt-")
    pyenvs.cc(["cc", "-O0", "-g", "-shared", "-fPIC", "-I", HEADERS, "-I", os.path.join(HEADERS, "internal"),
               "-o", os.path.join(d, "corrupt.so"), os.path.join(HERE, "native", "corrupt_ext.c")])
    return d


@pytest.mark.parametrize("mode,error,kept", [
    ("frame_chain", "frame unreadable at 0xdead0000", ["victim"]),
    ("code_pointer", "code object unreadable at 0x10", []),
    ("code_type", "not a code object", []),
])
def test_report_survives_corruption(ext_dir, mode, error, kept):
    r = fltest.run([PYTHON, "-c", JOB.format(mode=mode), ext_dir])
    assert r.signal == 11
    rep = r.report
    fltest.validate(rep)
    t = fltest.crashed_thread(rep)
    assert error in t.get("python_error", ""), t.get("python_error")
    assert [f["function"] for f in t["frames"] if f["kind"] == "python"] == kept
    assert t.get("interleaved") in (False, None)
    # The native stack is there regardless.
    assert any(f["kind"] == "native" for f in t["frames"])
