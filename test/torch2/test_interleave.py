"""CPython 3.14 as Debian builds it (hot/cold-split eval loop, no .symtab: the
frames that run Python code are python3.14+0x...): native and Python frames
are still merged in call order, from the entry frames each eval call keeps
on the C stack. C -> Python -> C -> Python through ctypes callbacks, on the
crashed thread and on a thread waiting in Python; and, checked against gdb on
the core file and faulthandler (test/lib/interleave_oracle.py, as on the
other interpreters), C -> Python -> C -> Python -> C on two threads through
ctypes and through an embedding program built against the root's 3.14."""
import os
import subprocess

import rootrun

import fltest

import interleave_oracle as oracle

ROOT = os.environ.get("FAULTLINE_TORCH_ROOT", "/var/cache/faultline/sid-root")

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


def check_against_oracles(r, exe_inside, workdir, job, nameless):
    assert r.signal == 11, (r.returncode, r.stderr)
    rep = fltest.validate(r.report)
    assert rep["python"]["version"].startswith("3.14"), rep["python"]
    if nameless:
        # The interpreter has no symbol for its eval loop: the merge rests on
        # the entry frames alone.
        assert not any((f.get("symbol") or "").startswith(oracle.EVAL) for t in rep["threads"] for f in t["frames"])
    exe = exe_inside if exe_inside.startswith(str(workdir)) else ROOT + exe_inside
    core = oracle.find_core(str(workdir))
    gdb = oracle.gdb_threads(exe, core, str(workdir), sysroot=ROOT,
                             solib_dirs=[os.path.dirname(fltest.LIB), str(workdir)])
    os.remove(core)
    oracle.check(rep, r.stderr, gdb, job, eval_module="/python3.14" if nameless else None)


def test_ctypes_chains_against_gdb_and_faulthandler(tmp_path):
    lib = str(tmp_path / "libflcb.so")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", lib,
                    oracle.CALLBACK_LIB_SRC], check=True)
    (tmp_path / "job.py").write_text(oracle.CTYPES_JOB)
    r = rootrun.run(oracle.with_core(["python3", str(tmp_path / "job.py"), lib]), tmp_path)
    check_against_oracles(r, r.report["process"]["executable"] if r.reports else "", tmp_path, "ctypes", True)


def test_embedding_program_against_gdb_and_faulthandler(tmp_path):
    exe = str(tmp_path / "embed")
    src = str(tmp_path / "embed_nested.c")
    with open(oracle.EMBED_SRC) as f:
        (tmp_path / "embed_nested.c").write_text(f.read())
    b = rootrun.run(["sh", "-c", 'gcc -O1 -g -fno-omit-frame-pointer -o "$0" "$1" $(python3-config --embed --cflags --ldflags)',
                     exe, src], tmp_path, preload=False)
    assert b.returncode == 0, b.stderr
    (tmp_path / "job.py").write_text(oracle.EMBED_JOB)
    r = rootrun.run(oracle.with_core([exe, "job.py"]), tmp_path)
    check_against_oracles(r, exe, tmp_path, "embed", False)


CONCURRENT_INTERPRETERS_JOB = """
from concurrent import interpreters
code = '''
import ctypes
def inner_crash():
    ctypes.string_at(0)
def outer():
    inner_crash()
outer()
'''
def calls_into_it():
    interpreters.create().exec(code)
calls_into_it()
"""


def test_a_crash_in_a_concurrent_interpreter_keeps_the_callers_frames(tmp_path):
    # 3.14's public subinterpreters: the thread has a thread state in each
    # interpreter, and only the subinterpreter's frames were shown.
    (tmp_path / "job.py").write_text(CONCURRENT_INTERPRETERS_JOB)
    r = rootrun.run(["python3", str(tmp_path / "job.py")], tmp_path)
    assert r.signal == 11, r.stderr
    rep = fltest.validate(r.report)
    t = fltest.crashed_thread(rep)
    assert t.get("interleaved") is True, (t.get("python_error"), rep["faultline"]["errors"])
    py = [f["function"] for f in t["frames"] if f["kind"] == "python"]
    assert py == ["string_at", "inner_crash", "outer", "<module>", "exec", "calls_into_it",
                  "<module>"], py
