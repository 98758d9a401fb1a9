"""Checks a report's merged stacks (native and Python frames in call order)
against two oracles that share no code with faultline: gdb's backtrace of
the process's core file (the native frames of each thread) and CPython's
faulthandler dump (the Python frames of each thread), and checks that each
run of Python frames sits right before the interpreter frame that ran it.

The jobs: C -> Python -> C -> Python -> C chains on two threads, through
ctypes callbacks (`CTYPES_JOB` with native/callback_lib.c) and through an
embedding program (native/embed_nested.c: PyRun_SimpleString and
PyObject_Call). Both enable faulthandler for all threads and are run with
core dumps on (`with_core`); core_pattern must be a plain file name."""
import os
import re
import resource
import struct
import subprocess

import faulthandler_text

# The C halves of the jobs live with the CPython walker's tests.
NATIVE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "native"))
CALLBACK_LIB_SRC = os.path.join(NATIVE, "callback_lib.c")
EMBED_SRC = os.path.join(NATIVE, "embed_nested.c")

CTYPES_JOB = """
import ctypes, faulthandler, sys, threading, time
faulthandler.enable(all_threads=True)
lib = ctypes.CDLL(sys.argv[1])
CALLBACK = ctypes.CFUNCTYPE(None)

def blocked():
    lib.fl_block()

def waiter():
    lib.fl_call_back(CALLBACK(blocked))

def inner():
    lib.fl_crash_now()

def middle():
    lib.fl_call_back(CALLBACK(inner))

def outer():
    lib.fl_call_back(CALLBACK(middle))

threading.Thread(target=waiter, name="waiter", daemon=True).start()
while not lib.fl_blocked():
    time.sleep(0.001)
outer()
"""

EMBED_JOB = """
import emb, faulthandler
faulthandler.enable(all_threads=True)

def blocked():
    emb.block()

def waiter():
    emb.call(blocked)

emb.start_thread(waiter)
emb.wait_blocked()

def inner():
    emb.crash()

def middle():
    emb.call(inner)

def outer():
    emb.call(middle)

outer()
"""

# Each job's expected stacks, innermost first: C functions of ours (by
# symbol) and runs of Python functions, each run executed by one call of the
# eval loop (3.11+; 3.9/3.10 call it once per Python frame). A final
# "...NAME" stands for the rest of the thread's Python frames as faulthandler
# lists them, from NAME on, each run followed by its eval frame (threading's
# bootstrap frames, and which of its calls start an eval call, differ
# between versions).
EXPECTED = {
    "ctypes": {
        "crashed": ["fl_crash_now", ["inner"], "fl_call_back", ["middle"], "fl_call_back", ["outer", "<module>"]],
        "waiting": ["fl_block", ["blocked"], "fl_call_back", "...waiter"],
    },
    "embed": {
        "crashed": ["emb_crash", ["inner"], "emb_call", ["middle"], "emb_call", ["outer", "<module>"],
                    "run_script", "main"],
        "waiting": ["emb_block", ["blocked"], "emb_call", ["waiter"], "c_thread"],
    },
}
MARKERS = {"fl_crash_now", "fl_call_back", "fl_block", "emb_crash", "emb_call", "emb_block", "run_script",
           "main", "c_thread"}
EVAL = "_PyEval_EvalFrameDefault"


def with_core(args):
    """args run under a shell that first allows core dumps."""
    return ["sh", "-c", 'ulimit -c unlimited && exec "$@"', "sh"] + list(args)


def nameless(src, dst):
    """Copies the ELF file src to dst with every symbol name that starts with
    _PyEval_EvalFrameDefault (the eval loop and its .cold part, in .dynsym and
    .symtab) renamed to end in X: an interpreter whose eval loop has no
    symbol. Only for an executable nothing else links against (the dynamic
    loader would no longer find the name). Returns how many were renamed."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    assert data[:4] == b"\x7fELF" and data[4] == 2, src
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]
    renamed = 0
    name = b"\0" + EVAL.encode()
    for sh_name, _type, _flags, _addr, off, size in sections:
        sname = bytes(data[names_at + sh_name:data.index(b"\0", names_at + sh_name)])
        if sname not in (b".dynstr", b".strtab"):
            continue
        at = data.find(name, off, off + size)
        while at >= 0:
            data[at + len(name) - 1] = ord("X")
            renamed += 1
            at = data.find(name, at + 1, off + size)
    with open(dst, "wb") as f:
        f.write(data)
    os.chmod(dst, 0o755)
    return renamed


_GDB_SCRIPT = r'''
import gdb
for th in gdb.selected_inferior().threads():
    th.switch()
    f = gdb.newest_frame()
    print("THREAD %d" % th.ptid[1])
    n = 0
    while f is not None and n < 500:
        t = f.type()
        kind = ("sigtramp" if t == gdb.SIGTRAMP_FRAME else "inline" if t == gdb.INLINE_FRAME
                else "tailcall" if t == gdb.TAILCALL_FRAME else "normal")
        print("FRAME %#x %s %s" % (f.pc(), kind, f.name() or "??"))
        try:
            f = f.older()
        except gdb.error:
            break
        n += 1
'''


class GdbInternalError(AssertionError):
    """gdb stopped on an internal error of its own while reading the core
    (gdb 13: "decode_frame_entry_1: Assertion `fde->cie != NULL' failed",
    seen once in many runs): the oracle failed, not the report."""


def gdb_threads(exe, core, workdir, sysroot=None, solib_dirs=()):
    """{tid: [(pc, name)]}: gdb's unwind of each thread of the core, without
    the frames gdb infers for inlined functions and tail calls (they have no
    stack frame of their own), and for a thread stopped in a signal handler only the
    frames below the last signal frame (the interrupted code)."""
    script = os.path.join(workdir, "frames.gdb.py")
    with open(script, "w") as f:
        f.write(_GDB_SCRIPT)
    cmd = ["gdb", "-nx", "-batch"]
    if sysroot:
        cmd += ["-iex", "set sysroot " + sysroot]
    if solib_dirs:
        cmd += ["-iex", "set solib-search-path " + ":".join(solib_dirs)]
    cmd += ["-x", script, exe, core]
    # gdb's own core on an internal error (90 MB) must not land in the
    # suite's working directory, the source tree.
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=workdir,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    threads = {}
    cur = None
    for line in p.stdout.splitlines():
        if line.startswith("THREAD "):
            cur = threads.setdefault(int(line.split()[1]), [])
        elif line.startswith("FRAME ") and cur is not None:
            _, pc, kind, name = line.split(" ", 3)
            cur.append((int(pc, 16), kind, name))
    if not threads and "internal-error" in p.stdout + p.stderr:
        raise GdbInternalError(f"gdb failed on {core}:\n{p.stdout}\n{p.stderr}")
    assert threads, f"gdb read no threads from {core}:\n{p.stdout}\n{p.stderr}"
    out = {}
    for tid, frames in threads.items():
        last_sig = max((i for i, f in enumerate(frames) if f[1] == "sigtramp"), default=-1)
        out[tid] = [(pc, name) for pc, kind, name in frames[last_sig + 1:] if kind not in ("inline", "tailcall")]
    return out


def report_native(thread, gdb_frames):
    """(merged index, pc, frame) of a report thread's native frames, from the
    one gdb's unwind starts at (a crash re-raised by faulthandler's handler
    has the re-raise and the signal trampoline on top, which gdb's list,
    taken below the signal frame, leaves out)."""
    frames = [(i, int(f["pc"], 16), f) for i, f in enumerate(thread["frames"]) if f["kind"] == "native"]
    pcs = [pc for _, pc, _ in frames]
    first = pcs.index(gdb_frames[0][0]) if gdb_frames and gdb_frames[0][0] in pcs else 0
    return frames[first:]


def key_tokens(thread):
    """Our C functions, Python functions, and "eval" for the native frame
    right after a run of Python frames (the one the merge says ran it)."""
    out = []
    frames = thread["frames"]
    for i, f in enumerate(frames):
        if f["kind"] == "python":
            out.append(("py", f["function"]))
        elif i > 0 and frames[i - 1]["kind"] == "python":
            out.append(("eval",))
        elif f.get("symbol") in MARKERS:
            out.append(("c", f["symbol"]))
    return out


def expected_tokens(spec, minor, fh_functions):
    """EXPECTED's spec as key_tokens() would list it, and the function that
    starts its final "...NAME" (then the tokens after these are the rest of
    fh_functions from NAME on, with eval tokens after runs) or None."""
    out = []
    for piece in spec:
        if isinstance(piece, str) and piece.startswith("..."):
            return out, piece[3:]
        if isinstance(piece, str):
            out.append(("c", piece))
        elif minor <= 10:
            for fn in piece:
                out += [("py", fn), ("eval",)]
        else:
            out += [("py", fn) for fn in piece] + [("eval",)]
    return out, None


def check(report, stderr, gdb, job, eval_module=None):
    """Asserts, for the crashed thread and the thread waiting in C: the merged
    stack's native frames are gdb's frames (same pcs, in order, down to our
    outermost C function); its Python frames are faulthandler's (file, line,
    function, in order); the order of our C functions, Python runs and the
    eval frames after each run is EXPECTED[job]; and each native frame right
    after a Python run is the eval loop (gdb names it _PyEval_EvalFrameDefault,
    and every frame gdb names so follows a run), or, where eval_module is given
    (an eval loop without symbols), a frame of that module."""
    minor = int(report["python"]["version"].split(".")[1])
    dumps = faulthandler_text.parse(stderr)
    assert dumps, "no faulthandler dump on stderr:\n" + stderr
    for role in ("crashed", "waiting"):
        if role == "crashed":
            threads = [t for t in report["threads"] if t["crashed"]]
            fh = [frames for current, frames, _ in dumps if current]
        else:
            waits = lambda fns: "blocked" in fns  # noqa: E731
            threads = [t for t in report["threads"] if not t["crashed"]
                       and waits([f.get("function") for f in t["frames"] if f["kind"] == "python"])]
            fh = [frames for current, frames, _ in dumps if not current and waits([f[2] for f in frames])]
        assert len(threads) == 1 and len(fh) == 1, (role, [t["tid"] for t in report["threads"]], dumps)
        t, fh = threads[0], fh[0]
        where = f"{job} {role} thread {t['tid']}"
        assert t.get("interleaved") is True, (where, t.get("python_error"), report["faultline"]["errors"])

        # Python frames: faulthandler's, in the same order.
        py = [(f["file"], f["line"], f["function"]) for f in t["frames"] if f["kind"] == "python"]
        assert py == [tuple(f) for f in fh], (where, py, fh)

        # Native frames: gdb's, pc for pc.
        g = gdb.get(t["tid"])
        assert g, (where, "gdb has no such thread", sorted(gdb))
        native = report_native(t, g)
        pcs = [pc for _, pc, _ in native]
        gpcs = [pc for pc, _ in g]
        outermost = max(k for k, (_, _, f) in enumerate(native) if f.get("symbol") in MARKERS)
        common = min(len(pcs), len(gpcs))
        assert common > outermost and pcs[:common] == gpcs[:common], (
            where, [(hex(p), f.get("symbol")) for _, p, f in native], [(hex(p), n) for p, n in g])

        # The order of C functions, Python runs and eval frames.
        tokens = key_tokens(t)
        want, more = expected_tokens(EXPECTED[job][role], minor, [f[2] for f in fh])
        if more:
            rest = tokens[len(want):]
            tokens = tokens[:len(want)]
            used = sum(1 for tok in want if tok[0] == "py")
            assert [tok for tok in rest if tok[0] != "eval"] == [("py", f[2]) for f in fh[used:]], (where, rest)
            assert rest[0] == ("py", more) and rest[-1] == ("eval",), (where, rest)
            assert all(not (a == b == ("eval",)) for a, b in zip(rest, rest[1:])), (where, rest)
        assert tokens == want, (where, tokens, want)

        # The native frame after each run is the eval loop, per gdb.
        after_run = {k for k, (i, _, _) in enumerate(native) if i > 0 and t["frames"][i - 1]["kind"] == "python"}
        for k in sorted(after_run):
            frame = native[k][2]
            if eval_module:
                assert frame["module"].endswith(eval_module), (where, frame)
            else:
                assert g[k][1].startswith(EVAL[:-1]), (where, k, g[k], frame)
        if not eval_module:
            named = {k for k in range(common) if g[k][1].startswith(EVAL[:-1])}
            assert named == after_run, (where, sorted(named), sorted(after_run))


def find_core(workdir):
    cores = [os.path.join(workdir, p) for p in os.listdir(workdir) if re.fullmatch(r"core(\.\d+)?", p)]
    assert len(cores) == 1, f"expected one core file in {workdir} (core_pattern: " \
        f"{open('/proc/sys/kernel/core_pattern').read().strip()}), found {cores}"
    return cores[0]
