"""A live dump leaves a healthy job running (the first law): `faultline dump`
captures by ptrace where it is allowed, so no system call of the job fails or
ends early, and falls back to faultline's signal, saying so, where it is not."""
import json
import os
import subprocess

import pytest

import fltest

DUMPWAIT = fltest.program("dumpwait")
NOPTRACE = fltest.program("noptrace")

# Each waiting thread of dumpwait and the function it waits in.
WAITERS = {"poller": ("wait_in_poll", "poll"),
           "sleeper": ("wait_in_nanosleep", "nanosleep"),
           "epoller": ("wait_in_epoll", "epoll_wait"),
           "sigwaiter": ("wait_in_sigwait", "sigwait")}


# -EINTR in a result register, as the report writes it.
EINTR_RESULT = hex(-4 & (2**64 - 1))


def start(cmd, tmp_path, preload=True, env=None, preexec_fn=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    e["FAULTLINE_DIR"] = str(tmp_path)
    if preload:
        e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DUMP": "1"})
    e.update(env or {})
    p = subprocess.Popen(cmd, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
    assert p.stdout.readline().strip(), p.stderr.read()
    return p


def stop(p):
    if p.poll() is None:
        p.kill()
    p.wait(timeout=30)


def stop_with_vfork_children(p):
    """stop(p), after killing the vfork children its threads wait for."""
    tasks = f"/proc/{p.pid}/task"
    for t in os.listdir(tasks) if p.poll() is None else []:
        for c in open(f"{tasks}/{t}/children").read().split():
            os.kill(int(c), 9)
    stop(p)


def symbols_by_thread(rep):
    return {t.get("name"): fltest.native_symbols(t) for t in rep["threads"]}


def check_dump(path, pid):
    rep = fltest.validate(json.load(open(path)))
    assert rep["kind"] == "dump" and rep["capture"] == "ptrace", rep.get("capture")
    assert rep["process"]["pid"] == pid
    v = fltest.cli("validate", path)
    assert v.returncode == 0, v.stdout + v.stderr
    names = symbols_by_thread(rep)
    assert len(rep["threads"]) == 5, names
    # The epoller's EINTR, which only the stop caused, is made a restart;
    # its registers show the result it had, not the restart's.
    [epoller] = [t for t in rep["threads"] if t.get("name") == "epoller"]
    assert epoller["registers"]["rax"] == EINTR_RESULT, epoller["registers"]
    for thread, (caller, call) in WAITERS.items():
        syms = names.get(thread) or []
        assert caller in syms, (thread, syms)
        # The libc call is above its caller (innermost first).
        assert any(s and call in s for s in syms[:syms.index(caller)]), (thread, syms)
    return rep


def test_100_dumps_leave_every_waiter_undisturbed(tmp_path):
    # Today's signal dump makes poll, epoll_wait and nanosleep fail with
    # EINTR: dumpwait exits 2..4 at the first dump.
    p = start([DUMPWAIT], tmp_path)
    try:
        for i in range(100):
            r = fltest.cli("dump", "--print-path", str(p.pid), timeout=60)
            assert r.returncode == 0, (i, r.stderr)
            assert p.poll() is None, (i, p.returncode, p.stderr.read())
            check_dump(r.stdout.strip(), p.pid)
        assert p.poll() is None, p.stderr.read()
    finally:
        stop(p)


def test_ptrace_dump_needs_no_library_and_matches_gdb(tmp_path):
    p = start([DUMPWAIT], tmp_path, preload=False)
    try:
        r = fltest.cli("dump", "--print-path", "--method", "ptrace", str(p.pid), timeout=60)
        assert r.returncode == 0, r.stderr
        rep = check_dump(r.stdout.strip(), p.pid)
        shown = fltest.cli("show", "--color=never", r.stdout.strip())
        assert f"Live dump of process {p.pid} (by ptrace, no signal sent)" in shown.stdout
        assert p.poll() is None
        # Oracle: gdb's backtrace of the same (still waiting) threads names the
        # same callers, thread by thread. (gdb's attach makes epoll_wait fail
        # with EINTR: dumpwait may end after it.)
        g = subprocess.run(["gdb", "-batch", "-nx", "-p", str(p.pid), "-ex",
                            "thread apply all bt"], capture_output=True, text=True, timeout=120)
        for t in rep["threads"]:
            block = g.stdout.split(f"LWP {t['tid']})")[1].split("\nThread ")[0]
            gdb_funcs = [w for w in WAITERS.values() if w[0] in block]
            ours = [w for w in WAITERS.values() if w[0] in fltest.native_symbols(t)]
            assert gdb_funcs == ours, (t["name"], block, fltest.native_symbols(t))
    finally:
        stop(p)


GDB_FRAMES = """python
import gdb
for th in gdb.selected_inferior().threads():
    th.switch()
    f, pcs = gdb.newest_frame(), []
    while f is not None:
        if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            pcs.append(f.pc())
        f = f.older()
    print("frames", th.ptid[1], *(hex(pc) for pc in pcs))
end
"""


def gdb_pcs_by_thread(pid, tmp_path):
    """gdb's backtrace of every thread of pid: {tid: [pc, ...]}, innermost
    first, the frames on the stack only (not those gdb makes up for inlined
    calls and, from DWARF's call sites, for tail calls)."""
    script = tmp_path / "frames.gdb"
    script.write_text(GDB_FRAMES)
    g = subprocess.run(["gdb", "-batch", "-nx", "-p", str(pid), "-x", str(script)],
                       capture_output=True, text=True, timeout=120)
    out = {}
    for line in g.stdout.splitlines():
        if line.startswith("frames "):
            tid, *pcs = line.split()[1:]
            out[int(tid)] = [int(pc, 16) for pc in pcs]
    return out, g.stdout + g.stderr


def test_ptrace_dump_unwinds_as_a_crash_does_and_gdb_agrees_at_every_pc(tmp_path):
    # Threads blocked in libc (poll, nanosleep, epoll_wait, sigwait, a
    # futex), the main thread in pause(), one stopped in the middle of a
    # function built at -O2 without frame pointers, whose caller only the
    # unwind tables find, and one in a function without unwind tables (built
    # with frame pointers), where the CFI unwinder stops and the
    # frame-pointer chain goes on. The dump unwinds them with the crash
    # path's own unwinder (was libunwind's remote unwinder); gdb, attached
    # after it, is the oracle: every frame gdb shows is ours, at the same pc.
    p = start([DUMPWAIT, "busy"], tmp_path, preload=False)
    try:
        r = fltest.cli("dump", "--print-path", "--method", "ptrace", str(p.pid), timeout=60)
        assert r.returncode == 0, r.stderr
        rep = fltest.validate(json.load(open(r.stdout.strip())))
        assert p.poll() is None, p.stderr.read()
        threads = {t["name"]: t for t in rep["threads"]}
        assert sorted(threads) == sorted(list(WAITERS) +
                                         ["dumpwait", "futexer", "spinner", "untabled"])
        for t in rep["threads"]:
            # By the tables alone, but where there are none.
            want = "cfi+frame-pointer" if t["name"] == "untabled" else "cfi"
            assert t["unwinder"] == want, (t["name"], t["unwinder"], rep["faultline"]["errors"])
        spin = fltest.native_symbols(threads["spinner"])
        assert spin[:3] == ["spin_without_frame_pointer", "spin_in_user_code", "spinner"], spin
        untabled = fltest.native_symbols(threads["untabled"])
        assert untabled[:4] == ["spin_without_unwind_tables", "spin_in_untabled_code", "untabled",
                                "start_thread"], untabled
        assert "wait_in_futex" in fltest.native_symbols(threads["futexer"])
        gdb, text = gdb_pcs_by_thread(p.pid, tmp_path)
        assert set(gdb) == {t["tid"] for t in rep["threads"]}, text
        for t in rep["threads"]:
            ours = [int(f["pc"], 16) for f in t["frames"] if f["kind"] == "native"]
            theirs = gdb[t["tid"]]
            assert len(theirs) >= 2, (t["name"], text)  # gdb stops at main
            if t["name"] in ("spinner", "untabled"):
                # They ran on between the two: the same callers. The frame-
                # pointer chain ends in libc (built without frame pointers),
                # in start_thread, which gdb has too.
                n = 4 if t["name"] == "untabled" else len(theirs)
                assert ours[1:n] == theirs[1:n], (t["name"], ours, theirs)
            else:
                assert ours[:len(theirs)] == theirs, (t["name"], ours, theirs)
    finally:
        stop(p)


def test_dump_of_an_exiting_or_gone_process_fails_cleanly(tmp_path):
    p = start([DUMPWAIT], tmp_path, preload=False)
    pid = p.pid
    stop(p)
    r = fltest.cli("dump", "--method", "ptrace", str(pid), timeout=60)
    assert r.returncode == 1 and "no process" in r.stderr, r.stderr


WAITER = "import os, sys\nprint(os.getpid(), flush=True)\nsys.stdin.readline()\n"


@pytest.mark.skipif(not os.path.exists(NOPTRACE), reason="built without libseccomp")
def test_where_ptrace_is_refused_the_dump_falls_back_to_the_signal_and_says_so(tmp_path):
    prog = tmp_path / "job.py"
    prog.write_text(WAITER)
    p = start(["/usr/bin/python3", str(prog)], tmp_path)
    # A sanitized CLI's leak check stops its threads with ptrace at exit,
    # which the filter refuses too (a fatal error of its own, exit 1).
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    try:
        # --method ptrace: refused, and nothing is sent.
        r = subprocess.run([NOPTRACE, fltest.CLI, "dump", "--method", "ptrace", str(p.pid)],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 1, r.stderr
        assert "cannot dump process" in r.stderr and "Operation not permitted" in r.stderr
        assert not list(tmp_path.glob("faultline-*.json"))
        # auto: the signal, said on stderr; the handler it reaches has the
        # library's own helper, which ptrace is not refused, take the dump.
        r = subprocess.run([NOPTRACE, fltest.CLI, "dump", "--print-path", str(p.pid)],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        assert "ptrace refused" in r.stderr and "EINTR" in r.stderr, r.stderr
        rep = fltest.validate(json.load(open(r.stdout.strip())))
        assert rep["kind"] == "dump" and rep["capture"] == "ptrace"
        assert p.poll() is None
    finally:
        p.stdin.write("\n")
        p.stdin.close()
        assert p.wait(timeout=30) == 0


# Threads waiting at known depths; once the test has dumped it, a line on
# stdin makes main dump its threads with faulthandler from the same line it
# waited on (the readline and the dump share line 17), so both see one state.
PY_JOB = """import faulthandler, os, sys, threading
ready = threading.Barrier(4)
def leaf(ev):
    ready.wait()
    ev.wait()
def middle(ev):
    leaf(ev)
def outer(ev):
    middle(ev)
events = [threading.Event() for _ in range(3)]
threads = [threading.Thread(target=outer if i % 2 else middle, args=(events[i],))
           for i in range(3)]
for t in threads:
    t.start()
ready.wait()
def main_wait():
    print(os.getpid(), flush=True); sys.stdin.readline(); faulthandler.dump_traceback(sys.stdout)
main_wait()
for e in events:
    e.set()
"""


@pytest.mark.parametrize("python", ["/usr/bin/python3.11", "pyenv-3.11", "pyenv-3.12",
                                    "pyenv-3.13"])
def test_python_frames_of_a_ptrace_dump_equal_faulthandlers(tmp_path, python):
    import faulthandler_text
    import pyenvs
    if python.startswith("pyenv-"):
        prefix = pyenvs.pyenv_prefix(python[len("pyenv-"):])
        python = pyenvs.require(os.path.join(prefix, "bin", "python3") if prefix else None)
    prog = tmp_path / "job.py"
    prog.write_text(PY_JOB)
    p = start([python, str(prog)], tmp_path, preload=False)
    try:
        r = fltest.cli("dump", "--print-path", "--method", "ptrace", str(p.pid), timeout=60)
        assert r.returncode == 0, r.stderr
        rep = fltest.validate(json.load(open(r.stdout.strip())))
        out, _ = p.communicate("\n", timeout=60)
        assert p.returncode == 0
    finally:
        stop(p)
    assert rep["python"] and rep["python"]["implementation"] == "cpython"
    ours = {}
    for t in rep["threads"]:
        frames = [(f["file"], f["line"], f["function"]) for f in t["frames"]
                  if f["kind"] == "python"]
        if "pthread_id" in t:
            ours[int(t["pthread_id"], 16)] = faulthandler_text.as_faulthandler(frames)
    parsed = faulthandler_text.parse(out)
    ids = [int(line.split("0x")[1].split()[0], 16) for line in out.splitlines()
           if "(most recent call first)" in line]
    theirs = {i: frames for i, (_, frames, _) in zip(ids, parsed)}
    assert len(theirs) == 4, out
    assert ours == theirs, (ours, out)


# Threads born and ending all the time: some exit while they are attached
# (ESRCH), some are born after the thread list was read (the next round).
CHURN = """import os, sys, threading, time
def short():
    time.sleep(0.0005)
def churn():
    while True:
        ts = [threading.Thread(target=short) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
threading.Thread(target=churn, daemon=True).start()
print(os.getpid(), flush=True)
sys.stdin.readline()
"""


def test_dumps_of_a_job_whose_threads_come_and_go(tmp_path):
    prog = tmp_path / "churn.py"
    prog.write_text(CHURN)
    p = start(["/usr/bin/python3", str(prog)], tmp_path, preload=False)
    try:
        for i in range(30):
            r = fltest.cli("dump", "--print-path", "--method", "ptrace", str(p.pid), timeout=60)
            assert r.returncode == 0, (i, r.stderr)
            rep = fltest.validate(json.load(open(r.stdout.strip())))
            assert rep["capture"] == "ptrace" and rep["threads"][0]["tid"] == p.pid
            assert p.poll() is None
        out, _ = p.communicate("\n", timeout=60)
        assert p.returncode == 0
    finally:
        stop(p)


def test_a_target_that_exits_during_the_dumps_never_crashes_the_dump(tmp_path):
    # Ends after a while of its own, mid-dump for some of them: each dump
    # either succeeds or says the process is gone (exit 1), never a crash.
    prog = tmp_path / "brief.py"
    prog.write_text(CHURN.replace("sys.stdin.readline()", "time.sleep(0.5)"))
    outcomes = set()
    for _ in range(3):
        p = start(["/usr/bin/python3", str(prog)], tmp_path, preload=False)
        try:
            while p.poll() is None:
                r = fltest.cli("dump", "--print-path", "--method", "ptrace", str(p.pid),
                               timeout=60)
                assert r.returncode in (0, 1), (r.returncode, r.stderr)
                if r.returncode == 1:
                    assert "no process" in r.stderr or "exited" in r.stderr, r.stderr
                outcomes.add(r.returncode)
        finally:
            stop(p)
        assert p.returncode == 0
    assert 0 in outcomes


def task_field(pid, tid, name):
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split()[1]
    return None


def task_state(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def wait_until(cond):
    import time
    while not cond():  # bounded by the test's timeout
        time.sleep(0.01)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_dump_ended_by_a_signal_lets_every_thread_go(tmp_path, sig):
    import signal
    # The vforker's wait cannot be interrupted: it stays attached, with the
    # dump's interrupt pending, while the other threads are stopped, and the
    # dump is ended right then (held there: FAULTLINE_TEST_DUMP_HOLD).
    p = start([DUMPWAIT, "vfork"], tmp_path, preload=False)
    children = f"/proc/{p.pid}/task"
    try:
        tids = sorted(int(t) for t in os.listdir(children))
        wait_until(lambda: any(open(f"{children}/{t}/children").read().strip() for t in tids))
        vforker = [t for t in tids if open(f"{children}/{t}/comm").read().strip() == "vforker"]
        d = held_dump(p.pid)
        held_at(d, "threads stopped")
        others = [t for t in tids if t not in vforker]
        assert all(task_state(p.pid, t) == "t" for t in others)
        # Traced by the dump (its tracer thread).
        dump_tids = set(os.listdir(f"/proc/{d.pid}/task"))
        assert all(task_field(p.pid, t, "TracerPid") in dump_tids for t in tids)
        d.send_signal(getattr(signal, sig))
        assert d.wait(timeout=60) == -getattr(signal, sig), d.stderr.read()
        wait_until(lambda: all(task_field(p.pid, t, "TracerPid") == "0" for t in tids))
        wait_until(lambda: all(task_state(p.pid, t) != "t" for t in others))
        assert p.poll() is None, p.stderr.read()
        # Still healthy and dumpable.
        r = fltest.cli("dump", "--print-path", "--method", "ptrace", "--timeout", "1",
                       str(p.pid), timeout=60)
        assert r.returncode == 0, r.stderr
        rep = fltest.validate(json.load(open(r.stdout.strip())))
        [stuck] = [t for t in rep["threads"] if t["name"] == "vforker"]
        assert stuck["captured"] is False and "did not stop" in stuck["note"], stuck
        assert p.poll() is None, p.stderr.read()
    finally:
        stop_with_vfork_children(p)


def held_dump(pid, *options):
    """A ptrace dump of pid that waits at each of its test hold points
    (FAULTLINE_TEST_DUMP_HOLD) for a line from the test."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e["FAULTLINE_TEST_DUMP_HOLD"] = "1"
    return subprocess.Popen([fltest.CLI, "dump", "--print-path", "--method", "ptrace", *options,
                             str(pid)],
                            env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def held_at(d, where):
    seen = []
    for line in d.stderr:  # bounded by the test's timeout
        if line.strip() == f"faultline-test: {where}":
            return
        seen.append(line)
    raise AssertionError(f"dump ended before '{where}': {seen} rc={d.wait()}")


def release(d):
    d.stdin.write("\n")
    d.stdin.flush()


def pending_mask(pid, field="ShdPnd"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    return 0


def in_syscall(pid, tid, nr):
    with open(f"/proc/{pid}/task/{tid}/syscall") as f:
        return f.read().split()[0] == str(nr)


def dump_sending(pid, sig):
    """A ptrace dump of pid during which pid is sent sig (pending when the
    threads go on); the report's path."""
    d = held_dump(pid)
    held_at(d, "threads stopped")
    os.kill(pid, sig)
    wait_until(lambda: pending_mask(pid) & (1 << (sig - 1)))
    release(d)
    held_at(d, "threads let go")
    release(d)
    out, err = d.communicate(timeout=60)
    assert d.returncode == 0, err
    return out.strip()


def test_a_sigterm_that_comes_during_a_dump_still_ends_the_epoll_loop(tmp_path):
    import signal
    # A service's main loop: epoll_wait(-1) until its SIGTERM handler sets a
    # flag. A SIGTERM that comes while the dump holds the thread must end the
    # wait with EINTR as it would without the dump; a dump that makes the call
    # again instead leaves the service running forever.
    p = start([DUMPWAIT, "term"], tmp_path, preload=False)
    try:
        wait_until(lambda: in_syscall(p.pid, p.pid, 232))  # epoll_wait
        out = dump_sending(p.pid, signal.SIGTERM)
        fltest.validate(json.load(open(out)))
        # Bounded wait, not a timing: without the fix the service never ends.
        assert p.wait(timeout=60) == 0, p.stderr.read()
        assert p.stdout.read().strip() == "stopped"
    finally:
        stop(p)


@pytest.mark.parametrize("dump", [False, True], ids=["alone", "dumped-while-stopped"])
def test_a_job_stopped_and_continued_sees_the_eintr_linux_gives_it(tmp_path, dump):
    import signal
    # Linux ends epoll_wait with EINTR after SIGSTOP and SIGCONT, with no
    # handler (signal(7)). A dump of the stopped job finds the thread in that
    # group stop: its EINTR is the stop's, not the dump's, and stays.
    p = start([DUMPWAIT, "stopcont"], tmp_path, preload=False)
    try:
        wait_until(lambda: in_syscall(p.pid, p.pid, 232))  # epoll_wait
        os.kill(p.pid, signal.SIGSTOP)
        wait_until(lambda: task_state(p.pid, p.pid) == "T")
        if dump:
            r = fltest.cli("dump", "--print-path", "--method", "ptrace", str(p.pid), timeout=60)
            assert r.returncode == 0, r.stderr
        os.kill(p.pid, signal.SIGCONT)
        # Bounded wait, not a timing: a restarted call never ends.
        assert p.wait(timeout=60) == 0, p.stderr.read()
        assert p.stdout.read().strip() == "eintr"
    finally:
        stop(p)


def test_an_ignored_signal_queued_during_a_dump_disturbs_no_wait(tmp_path):
    import signal
    # SIGCHLD at its default action is queued only because the threads are
    # traced: when they go on it is dropped, and every call is made again.
    p = start([DUMPWAIT], tmp_path, preload=False)
    try:
        dump_sending(p.pid, signal.SIGCHLD)
        # Every thread is back in its call (one that had failed would have
        # ended the process).
        r = fltest.cli("dump", "--print-path", "--method", "ptrace", str(p.pid), timeout=60)
        assert r.returncode == 0, r.stderr
        check_dump(r.stdout.strip(), p.pid)
        assert p.poll() is None, p.stderr.read()
    finally:
        stop(p)


def test_threads_in_vfork_are_left_out_together_and_all_let_go(tmp_path):
    import signal
    # Three threads wait for vfork children no ptrace stop can interrupt: the
    # dump captures the others after one deadline for all (not one each,
    # which held the other threads stopped 5 s per such thread) and lets them
    # go. It keeps waiting for the three (until --timeout): one whose vfork
    # ends meanwhile is captured alone as soon as it stops, and let go at
    # once. Those still waiting are listed, and when the dump has read
    # everything none is attached any more: one whose wait ends after that,
    # while the dump still renders, never stops (it stayed stopped until the
    # dump exited).
    p = start([DUMPWAIT, "vfork", "3"], tmp_path, preload=False)
    tasks = f"/proc/{p.pid}/task"
    try:
        tids = sorted(int(t) for t in os.listdir(tasks))
        vforkers = [t for t in tids if open(f"{tasks}/{t}/comm").read().strip() == "vforker"]
        assert len(vforkers) == 3
        kids = {}
        wait_until(lambda: all(open(f"{tasks}/{t}/children").read().strip() for t in vforkers))
        for t in vforkers:
            kids[t] = int(open(f"{tasks}/{t}/children").read().split()[0])
        d = held_dump(p.pid, "--timeout", "1")
        held_at(d, "threads stopped")
        # One vfork ends while the dump holds the others: its thread comes
        # to our interrupt's stop after the deadline.
        late = vforkers[0]
        os.kill(kids.pop(late), signal.SIGKILL)
        wait_until(lambda: task_state(p.pid, late) == "t")
        release(d)
        held_at(d, "threads let go")
        # Every thread let go, the late one and those still in vfork too.
        assert all(task_field(p.pid, t, "TracerPid") == "0" for t in tids)
        wait_until(lambda: task_state(p.pid, late) != "t")
        # A vfork that ends now, while the dump renders: its thread goes on
        # to pause() (34) and never stops.
        after = vforkers[1]
        os.kill(kids.pop(after), signal.SIGKILL)
        wait_until(lambda: task_state(p.pid, after) == "t" or in_syscall(p.pid, after, 34))
        assert task_state(p.pid, after) != "t"
        release(d)
        out, err = d.communicate(timeout=60)
        assert d.returncode == 0, err
        rep = fltest.validate(json.load(open(out.strip())))
        by_tid = {t["tid"]: t for t in rep["threads"]}
        left_out = [t for t in rep["threads"] if t.get("captured") is False]
        assert sorted(t["tid"] for t in left_out) == sorted(vforkers[1:]), left_out
        assert all("did not stop" in t["note"] and "vfork" in t["note"] for t in left_out)
        assert by_tid[late]["captured"] is True, by_tid[late]
        assert "captured alone" in by_tid[late]["note"], by_tid[late]
        assert "vforker" in fltest.native_symbols(by_tid[late]), by_tid[late]
        assert all(t.get("captured") is not False for t in rep["threads"]
                   if t["tid"] not in vforkers)
        # Every thread untraced, none in a ptrace stop, the job running.
        assert all(task_field(p.pid, t, "TracerPid") == "0" for t in tids)
        wait_until(lambda: all(task_state(p.pid, t) != "t" for t in tids))
        assert p.poll() is None, p.stderr.read()
        for k in kids.values():
            os.kill(k, signal.SIGKILL)
        # Out of vfork, each vforker waits in pause() (34).
        wait_until(lambda: all(in_syscall(p.pid, t, 34) for t in vforkers))
        r = fltest.cli("dump", "--print-path", "--method", "ptrace", str(p.pid), timeout=60)
        assert r.returncode == 0, r.stderr
        rep = fltest.validate(json.load(open(r.stdout.strip())))
        assert all(t.get("captured") is not False for t in rep["threads"]), rep["threads"]
        assert p.poll() is None, p.stderr.read()
    finally:
        stop_with_vfork_children(p)


def seized_dump(pid):
    """A ptrace dump of pid that holds after it attaches each thread, before
    it asks it to stop, and where held_dump holds."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e["FAULTLINE_TEST_DUMP_HOLD"] = "seized"
    return subprocess.Popen([fltest.CLI, "dump", "--print-path", "--method", "ptrace", str(pid)],
                            env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def held_at_each_seized(d, act):
    """Calls act(tid) at each thread the dump d has attached and not yet
    asked to stop, then lets it go on; returns at "threads stopped"."""
    seen = []
    for line in d.stderr:  # bounded by the test's timeout
        line = line.strip()
        if line.startswith("faultline-test: thread seized "):
            act(int(line.split()[-1]))
            release(d)
        elif line == "faultline-test: threads stopped":
            return
        seen.append(line)
    raise AssertionError(f"dump ended before 'threads stopped': {seen} rc={d.wait()}")


def signal_before_the_stop(pid, tid, sig):
    """An act for held_at_each_seized: sig to process pid when thread tid is
    attached, which takes it before the dump asks it to stop (its first stop
    is the signal's)."""
    def act(seized):
        if seized == tid:
            os.kill(pid, sig)
            wait_until(lambda: task_state(pid, tid) == "t")
    return act


@pytest.mark.parametrize("end", ["SIGTERM", "SIGINT", "SIGHUP", "finish"])
def test_a_signal_a_thread_stopped_to_take_is_never_lost(tmp_path, end):
    import signal
    # The receiver takes SIGRTMIN (queued, counted) just after the dump has
    # attached it: it stops on its way to handle it, and the dump must give
    # it back when it lets the thread go, also when the dump itself is ended
    # by a signal while it holds the threads.
    p = start([DUMPWAIT, "rtsig"], tmp_path, preload=False)
    tasks = f"/proc/{p.pid}/task"
    try:
        tids = [int(t) for t in os.listdir(tasks)]
        [rx] = [t for t in tids if open(f"{tasks}/{t}/comm").read().strip() == "receiver"]
        wait_until(lambda: in_syscall(p.pid, rx, 34))  # pause
        d = seized_dump(p.pid)
        held_at_each_seized(d, signal_before_the_stop(p.pid, rx, signal.SIGRTMIN))
        if end == "finish":
            release(d)
            held_at(d, "threads let go")
            release(d)
            assert d.wait(timeout=60) == 0, d.stderr.read()
        else:
            d.send_signal(getattr(signal, end))
            assert d.wait(timeout=60) == -getattr(signal, end), d.stderr.read()
        wait_until(lambda: all(task_field(p.pid, t, "TracerPid") == "0" for t in tids))
        p.stdin.write("\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert out.strip() == "got 1", out
    finally:
        stop(p)


def ignore_sigusr2():
    import signal
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # kept across exec


@pytest.mark.parametrize("sig", ["SIGURG", "SIGCHLD", "SIGUSR2"])
def test_an_ignored_signal_that_wakes_a_wait_before_the_stop_leaves_it_waiting(tmp_path, sig):
    import signal
    # epoll_wait(-1), and the program exits ("eintr") if it ever fails with
    # EINTR. A signal it ignores (by default: SIGURG, SIGCHLD; SIG_IGN:
    # SIGUSR2) is dropped when sent, unless the thread is traced: then it
    # wakes the wait, which fails with EINTR, and the thread stops on its
    # way to take it. Without the dump the wait goes on; with it too.
    p = start([DUMPWAIT, "stopcont"], tmp_path, preload=False, preexec_fn=ignore_sigusr2)
    try:
        wait_until(lambda: in_syscall(p.pid, p.pid, 232))  # epoll_wait
        d = seized_dump(p.pid)
        held_at_each_seized(d, signal_before_the_stop(p.pid, p.pid, getattr(signal, sig)))
        release(d)
        held_at(d, "threads let go")
        release(d)
        out, err = d.communicate(timeout=60)
        assert d.returncode == 0, err
        rep = fltest.validate(json.load(open(out.strip())))
        [t] = rep["threads"]
        assert t["registers"]["rax"] == EINTR_RESULT, t["registers"]
        # Back in its wait, or ended by the EINTR.
        wait_until(lambda: p.poll() is not None or (task_state(p.pid, p.pid) == "S"
                                                    and in_syscall(p.pid, p.pid, 232)))
        assert p.poll() is None, p.stdout.read()
    finally:
        stop(p)
