"""The merged stack of a crash in C code called from Python, called from a C
callback, called from Python (ctypes CFUNCTYPE): native and Python frames in
call order, checked frame by frame on every interpreter."""
import os
import tempfile

import pytest

import fltest
import pyenvs

HERE = os.path.dirname(os.path.abspath(__file__))

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
               os.path.join(HERE, "native", "callback_lib.c")])
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


SUBINTERPRETER_JOB = """
import sys
code = '''
import faulthandler
def inner_crash():
    faulthandler._sigsegv()
def outer():
    inner_crash()
outer()
'''
if sys.version_info >= (3, 13):
    import _interpreters
    def run():
        _interpreters.exec(_interpreters.create("legacy"), code)
elif sys.version_info >= (3, 12):
    import _xxsubinterpreters as _i
    def run():
        _i.run_string(_i.create(isolated=False), code)
else:
    import _xxsubinterpreters as _i
    def run():
        _i.run_string(_i.create(), code)
def calls_into_it():
    run()
calls_into_it()
"""


@pytest.mark.parametrize("python", pyenvs.interpreter_params())
def test_a_thread_in_a_subinterpreter_keeps_its_callers_frames(python):
    # A thread that calls into a subinterpreter (concurrent.interpreters in
    # 3.14) has a thread state in each interpreter. Only the first one found
    # was shown: the subinterpreter's frames, without the caller's. They are
    # one stack, ordered by where each entered the eval loop on the C stack
    # (3.11+: 3.9 and 3.10 keep no such address, and keep the old stack).
    python = pyenvs.require(python)
    r = fltest.run([python, "-c", SUBINTERPRETER_JOB])
    rep = r.report
    fltest.validate(rep)
    t = fltest.crashed_thread(rep)
    functions = [f["function"] for f in t["frames"] if f["kind"] == "python"]
    minor = int(rep["python"]["version"].split(".")[1])
    assert rep["python"]["threads_total"] == 2
    if minor <= 10:
        assert functions == ["inner_crash", "outer", "<module>"]
        return
    assert functions == ["inner_crash", "outer", "<module>", "run", "calls_into_it", "<module>"]
    assert t["interleaved"] is True, (t.get("python_error"), rep["faultline"]["errors"])
    assert t["python_frames_total"] == 6
    # Each run sits before the eval frame that ran it: the subinterpreter's
    # three, an eval frame, then (after the C calls into it) the caller's.
    kinds = [("py" if f["kind"] == "python" else
              "eval" if (f.get("symbol") or "").startswith("_PyEval_EvalFrameDefault") else "c")
             for f in t["frames"]]
    first_eval = kinds.index("eval")
    assert kinds[first_eval - 3:first_eval] == ["py"] * 3
    assert kinds.count("py") == 6 and kinds[-1] != "py"
