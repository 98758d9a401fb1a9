"""CPython 3.14 as Debian builds it (hot/cold-split eval loop, no .symtab: the
frames that run Python code are python3.14+0x...): native and Python frames
are still merged in call order, from the entry frames each eval call keeps
on the C stack. C -> Python -> C -> Python through ctypes callbacks, on the
crashed thread and on a thread waiting in Python."""
import os
import subprocess

import rootrun

import fltest

JOB = """
import ctypes, sys, threading
lib = ctypes.CDLL(sys.argv[1])
CALLBACK = ctypes.CFUNCTYPE(None)
ready = threading.Event()

def waiter():
    ready.set()
    threading.Event().wait()

def from_callback():
    lib.fl_crash_now()

def outer():
    lib.fl_call_back(CALLBACK(from_callback))

threading.Thread(target=waiter, name="waiter", daemon=True).start()
ready.wait()
outer()
"""


def key_frames(thread):
    """Our C functions, Python functions, and "eval" for the interpreter's
    frame right after a run of Python frames (the one that ran them)."""
    out = []
    frames = thread["frames"]
    for i, f in enumerate(frames):
        if f["kind"] == "python":
            out.append(("py", f["function"]))
        elif f.get("symbol") in ("fl_crash_now", "fl_call_back"):
            out.append(("c", f["symbol"]))
        elif i > 0 and frames[i - 1]["kind"] == "python":
            assert f["module"].endswith("python3.14") and not f.get("symbol"), f
            out.append(("c", "eval"))
    return out


def test_crashed_and_waiting_threads_are_interleaved(tmp_path):
    lib = str(tmp_path / "libflcb.so")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", lib,
                    os.path.join(fltest.SOURCE, "test", "python", "native", "callback_lib.c")], check=True)
    (tmp_path / "job.py").write_text(JOB)
    r = rootrun.run(["python3", str(tmp_path / "job.py"), lib], tmp_path)
    assert r.signal == 11, r.stderr
    rep = fltest.validate(r.report)
    assert rep["python"]["version"].startswith("3.14"), rep["python"]
    t = fltest.crashed_thread(rep)
    assert t.get("interleaved") is True, (t.get("python_error"), rep["faultline"]["errors"])
    assert key_frames(t) == [("c", "fl_crash_now"), ("py", "from_callback"), ("c", "eval"),
                             ("c", "fl_call_back"), ("py", "outer"), ("py", "<module>"), ("c", "eval")]
    # The Python frames keep faulthandler's order (printed on stderr by the
    # interpreter's own handler, which runs after faultline's).
    py = [f["function"] for f in t["frames"] if f["kind"] == "python"]
    assert py == ["from_callback", "outer", "<module>"]
    waiting = [th for th in rep["threads"] if not th["crashed"]
               and any(f["kind"] == "python" and f["function"] == "waiter" for f in th["frames"])]
    assert len(waiting) == 1, rep["threads"]
    w = waiting[0]
    assert w.get("interleaved") is True
    kinds = [f["kind"] for f in w["frames"]]
    first_py = kinds.index("python")
    # Native wait frames (libc) come first, then the Python run, then the eval loop that ran it.
    assert first_py > 0 and "python" not in kinds[:first_py]
    names = [f["function"] for f in w["frames"] if f["kind"] == "python"]
    assert names[:2] == ["wait", "wait"] and "waiter" in names, names
