"""The merged stack of a crash in C code called from Python, called from a C
callback, called from Python (ctypes CFUNCTYPE): native and Python frames in
call order, checked frame by frame on every interpreter."""
import os
import tempfile

import pytest

import pyenvs

fltest = pyenvs.fltest

JOB = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
CALLBACK = ctypes.CFUNCTYPE(None)

def from_callback():
    lib.fl_crash_now()

def outer():
    lib.fl_call_back(CALLBACK(from_callback))

outer()
"""


@pytest.fixture(scope="module")
def callback_lib():
    out = os.path.join(tempfile.mkdtemp(prefix="faultline-cb-"), "libflcb.so")
    pyenvs.cc(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", out,
               os.path.join(pyenvs.HERE, "native", "callback_lib.c")])
    return out


def key_frames(thread):
    """The frames the test reasons about, in report order: our C functions,
    the eval loop, and Python functions."""
    out = []
    for f in thread["frames"]:
        if f["kind"] == "python":
            out.append(("py", f["function"]))
        else:
            sym = f.get("symbol") or ""
            if sym in ("fl_crash_now", "fl_call_back"):
                out.append(("c", sym))
            elif sym.startswith("_PyEval_EvalFrameDefault"):
                out.append(("c", "eval"))
    return out


@pytest.mark.parametrize("python", pyenvs.interpreter_params())
def test_callback_stack_is_interleaved(python, callback_lib):
    python = pyenvs.require(python)
    r = fltest.run([python, "-c", JOB, callback_lib])
    rep = r.report
    fltest.validate(rep)
    t = fltest.crashed_thread(rep)
    assert t.get("interleaved") is True, (t.get("python_error"), rep["faultline"]["errors"])
    minor = int(rep["python"]["version"].split(".")[1])
    if minor <= 10:  # one eval call per Python frame
        expected = [("c", "fl_crash_now"), ("py", "from_callback"), ("c", "eval"), ("c", "fl_call_back"),
                    ("py", "outer"), ("c", "eval"), ("py", "<module>"), ("c", "eval")]
    else:  # Python-to-Python calls stay in one eval call
        expected = [("c", "fl_crash_now"), ("py", "from_callback"), ("c", "eval"), ("c", "fl_call_back"),
                    ("py", "outer"), ("py", "<module>"), ("c", "eval")]
    assert key_frames(t) == expected
    # Nothing dropped by the merge: every Python frame is in the stack once.
    py = [f for f in t["frames"] if f["kind"] == "python"]
    assert len(py) == t["python_frames_total"]
    # The first frame is the faulting one.
    assert t["frames"][0]["kind"] == "native"
