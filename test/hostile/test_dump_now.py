"""A live dump asked for inside the process (faultline_dump_now(), the Python
package's dump_traceback) leaves the job undisturbed (the first law): a
helper (the `faultline` command) allowed with PR_SET_PTRACER captures it by
ptrace, so no other thread's system call fails with EINTR, and the program
never sees the helper (no SIGCHLD, nothing for waitpid(-1)). Where ptrace is
refused, the signal request is the fallback and the report says why."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import fltest


def _under_seccomp():
    """Whether this test runs under a seccomp filter (a container's default
    profile): then faultline never starts the helper, by design."""
    try:
        with open("/proc/self/status") as f:
            return any(l.split()[1:] != ["0"] for l in f if l.startswith("Seccomp:"))
    except OSError:
        return True


# The ptrace dumps the tests ask for need a machine that runs them without
# a seccomp filter of its own.
pytestmark = pytest.mark.skipif(_under_seccomp(),
                                reason="the tests run under a seccomp filter: dumps go by signal")

DUMPNOW = fltest.program("dumpnow")
NOPTRACE = fltest.program("noptrace")

# Each waiting thread of dumpnow and the function it waits in.
WAITERS = {"poller": ("wait_in_poll", "poll"),
           "sleeper": ("wait_in_nanosleep", "nanosleep"),
           "epoller": ("wait_in_epoll", "epoll_wait"),
           "reaper": ("reap_any", "wait")}


def start(cmd, tmp_path, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    e["FAULTLINE_DIR"] = str(tmp_path)
    # The helper is found beside the library (build/lib, build/bin).
    e.update(env or {})
    p = subprocess.Popen(cmd, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    return p


def ask(p, command):
    p.stdin.write(command + "\n")
    p.stdin.flush()
    line = p.stdout.readline().split()
    assert line, (p.wait(timeout=30), p.stderr.read())
    return line


def finish(p):
    if p.poll() is None:
        p.stdin.write("quit\n")
        p.stdin.close()
    return p.wait(timeout=30)


def test_dump_now_by_helper_leaves_every_waiter_and_the_reaper_undisturbed(tmp_path):
    # Today's faultline_dump_now() asks every thread by signal: poll,
    # nanosleep or epoll_wait fails with EINTR and dumpnow exits 2..4.
    p = start([DUMPNOW], tmp_path)
    try:
        for i in range(20):
            _, rc, path, _ = ask(p, "dump")
            assert rc == "0" and p.poll() is None, (i, rc, p.stderr.read())
            rep = fltest.validate(json.load(open(path)))
            assert os.path.dirname(path) == str(tmp_path)
            assert rep["kind"] == "dump" and rep["capture"] == "ptrace", rep.get("capture")
            assert "capture_fallback" not in rep
            assert rep["process"]["pid"] == p.pid
            names = {t.get("name"): fltest.native_symbols(t) for t in rep["threads"]}
            assert len(rep["threads"]) == 5, names
            for thread, (caller, call) in WAITERS.items():
                syms = names.get(thread) or []
                assert caller in syms, (thread, syms)
                assert any(s and call in s for s in syms[:syms.index(caller)]), (thread, syms)
            # The asking thread, stopped while it waited for the helper.
            assert rep["dumping_tid"] == p.pid
            main = [t for t in rep["threads"] if t["tid"] == p.pid][0]
            syms = fltest.native_symbols(main)
            assert "faultline_dump_now" in syms and "main" in syms, syms
        # No SIGCHLD, nothing reaped by waitpid(-1): the helpers were unseen.
        assert ask(p, "check") == ["sigchld", "0", "reaped", "0", "disturbed", "0"]
        assert len(list(tmp_path.glob("faultline-*.json"))) == 20
        # Only the job's own descriptors are left (the helper's pipe closed).
        fds = os.listdir(f"/proc/{p.pid}/fd")
        assert len(fds) <= 12, [os.readlink(f"/proc/{p.pid}/fd/{f}") for f in fds]
    finally:
        assert finish(p) == 0, p.stderr.read()


def test_two_threads_asking_at_once_both_get_a_ptrace_dump(tmp_path):
    # The second waits for the first's helper instead of falling back to
    # the signal (which would interrupt the waiters: dumpnow exits 2..4).
    p = start([DUMPNOW], tmp_path)
    try:
        for i in range(5):
            line = ask(p, "dump2")
            assert line[1] == "0" and line[3] == "0", (i, line)
        reports = [json.load(open(f)) for f in tmp_path.glob("faultline-*.json")]
        assert len(reports) == 10
        assert {r["capture"] for r in reports} == {"ptrace"}
        assert ask(p, "check") == ["sigchld", "0", "reaped", "0", "disturbed", "0"]
    finally:
        assert finish(p) == 0, p.stderr.read()


def test_dump_now_by_helper_says_where_its_report_is_as_the_signal_dump_did(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DIR": str(tmp_path)})
    code = ("import ctypes; lib = ctypes.CDLL(None); buf = ctypes.create_string_buffer(4096)\n"
            "assert lib.faultline_dump_now() == 0; lib.faultline_last_report(buf, 4096)\n"
            "print(buf.value.decode())")
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=e, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert json.load(open(path))["capture"] == "ptrace"
    assert r.stderr == f"faultline: report written to {path}\n"


def fallback_dump(cmd, tmp_path, env):
    """The one report of a dump that fell back to the signal, and why it did.
    tolerant: the waiters the signal interrupts wait again."""
    p = start(cmd + ["tolerant"], tmp_path, env=env)
    try:
        _, rc, path, _ = ask(p, "dump")
        assert rc == "0"
        rep = fltest.validate(json.load(open(path)))
        assert rep["kind"] == "dump" and rep["capture"] == "signal"
        assert len(list(tmp_path.glob("faultline-*.json"))) == 1
        return rep["capture_fallback"]
    finally:
        p.kill()
        p.wait(timeout=30)


def test_no_helper_found_falls_back_to_the_signal_and_says_why(tmp_path):
    why = fallback_dump([DUMPNOW], tmp_path, {"FAULTLINE_CLI": str(tmp_path / "no-faultline")})
    assert "FAULTLINE_CLI" in why, why


def test_a_helper_that_fails_leaves_the_signal_dump_and_says_so(tmp_path):
    why = fallback_dump([DUMPNOW], tmp_path, {"FAULTLINE_CLI": "/bin/false"})
    assert why == "the faultline helper failed", why


@pytest.mark.skipif(not os.path.exists(NOPTRACE), reason="built without libseccomp")
def test_where_ptrace_is_refused_dump_now_falls_back_to_the_signal_and_says_so(tmp_path):
    # A seccomp filter refuses ptrace to the job and so to its helper; any
    # filter in force keeps the helper from being started at all.
    env = {"ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                  "detect_leaks=0"]))}
    why = fallback_dump([NOPTRACE, DUMPNOW], tmp_path, env)
    assert "seccomp filter" in why, why


PY_JOB = """
import ctypes, os, sys, threading
import faultline

libc = ctypes.CDLL(None, use_errno=True)

class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

class pollfd(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int), ("events", ctypes.c_short), ("revents", ctypes.c_short)]

r, w = os.pipe()
ready = threading.Barrier(3)

def disturbed(what, rc):
    sys.stderr.write(f"{what} returned {rc}: {os.strerror(ctypes.get_errno())}\\n")
    os._exit(2)

def poll_forever():
    p = pollfd(r, 1, 0)
    ready.wait()
    disturbed("poll", libc.poll(ctypes.byref(p), 1, -1))

def sleep_an_hour():
    ts = timespec(3600, 0)
    ready.wait()
    disturbed("nanosleep", libc.nanosleep(ctypes.byref(ts), None))

for fn in (poll_forever, sleep_an_hour):
    threading.Thread(target=fn, name=fn.__name__, daemon=True).start()
faultline.enable()
ready.wait()
libc.usleep(100000)

def look():
    return faultline.dump_traceback(file=open(os.devnull, "w"))

for i in range(10):
    print(look(), flush=True)
"""


def test_python_dump_traceback_by_helper_leaves_waiters_undisturbed(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    e.update({"FAULTLINE_DIR": str(tmp_path), "FAULTLINE_LIB": fltest.LIB,
              "PYTHONPATH": os.path.join(fltest.SOURCE, "python")})
    prog = tmp_path / "job.py"
    prog.write_text(textwrap.dedent(PY_JOB))
    r = subprocess.run([sys.executable, str(prog)], env=e, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    paths = r.stdout.split()
    assert len(paths) == 10
    for path in paths:
        rep = fltest.validate(json.load(open(path)))
        assert rep["kind"] == "dump" and rep["capture"] == "ptrace"
        # Each thread's innermost Python frame: the waiter's own function.
        inner = sorted(fs[0] for fs in ([f["function"] for f in t["frames"]
                                         if f["kind"] == "python"] for t in rep["threads"]) if fs)
        assert inner == ["dump_traceback", "poll_forever", "sleep_an_hour"], inner
        me = [t for t in rep["threads"] if t["tid"] == rep["process"]["pid"]][0]
        assert [f["function"] for f in me["frames"] if f["kind"] == "python"][:3] == \
            ["dump_traceback", "look", "<module>"]


HOSTILE = fltest.program("dumpnow_hostile")


def hostile(mode, tmp_path):
    """dumpnow_hostile's lines (WHAT RC PATH / stray N) and its reports."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    e["FAULTLINE_DIR"] = str(tmp_path)
    r = subprocess.run([HOSTILE, mode], env=e, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    lines = [line.split() for line in r.stdout.splitlines()]
    reports = {str(f): fltest.validate(json.load(open(f))) for f in tmp_path.glob("faultline-*.json")}
    return lines, reports


def test_a_seccomp_sandbox_that_forbids_new_processes_gets_the_signal_dump(tmp_path):
    # The helper's clone would be killed with SIGSYS (the job with it): with
    # any seccomp filter in force the dump is by signal, and the job goes on.
    lines, reports = hostile("seccomp", tmp_path)
    assert [line[:2] for line in lines] == [["dump", "0"]], lines
    rep = reports[lines[0][2]]
    assert rep["capture"] == "signal" and "seccomp" in rep["capture_fallback"], rep
    assert len(reports) == 1


def test_a_thread_cancelled_while_it_dumps_leaves_no_helper_behind(tmp_path):
    # Its dump ends before the cancel is acted on; the next dump is by ptrace
    # too (not kept waiting for a stuck helper), and no child is left over.
    lines, reports = hostile("cancel", tmp_path)
    assert [line[:2] for line in lines[:2]] == [["first", "0"], ["second", "0"]], lines
    assert lines[0][2] != lines[1][2]
    assert {reports[line[2]]["capture"] for line in lines[:2]} == {"ptrace"}, lines
    assert lines[2][0] == "stray" and lines[2][1] in ("0", "-1"), lines
    assert len(reports) == 2


def test_a_fork_during_a_helper_dump_leaves_the_child_its_own_dumps(tmp_path):
    # The fork child inherits "a helper runs" from its parent, whose helper
    # it does not have: its dump is still by ptrace, not a fallback.
    lines, reports = hostile("forkdump", tmp_path)
    got = {line[0]: line for line in lines}
    assert got["child"][1] == "0" and got["parent"][1] == "0", lines
    child = reports[got["child"][2]]
    assert child["capture"] == "ptrace" and "capture_fallback" not in child, child
    assert child["process"]["pid"] != reports[got["parent"][2]]["process"]["pid"]


def test_fork_children_holding_the_helpers_pipe_do_not_hold_up_the_dump(tmp_path):
    # A fork while the helper's output pipe is open in the process keeps a
    # write end open for the fork child's life (here: until both dumps are
    # over). A dump that waited for the end of the pipe would wait out the
    # helper's 60 s and fall back to the signal.
    lines, reports = hostile("forkpipe", tmp_path)
    dumps = [line for line in lines if line[0] == "dump"]
    assert [line[:2] for line in dumps] == [["dump", "0"]] * 2, lines
    assert ["forked", "2"] in lines, lines  # one child per dump, in its window
    assert {reports[line[2]]["capture"] for line in dumps} == {"ptrace"}
    assert len(reports) == 2


DUMPLATER = fltest.program("dumplater")


def dump_later(tmp_path, mode=None, env=None):
    """dumplater run under the preload with FAULTLINE_DUMP_AFTER=1."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DIR": str(tmp_path),
              "FAULTLINE_DUMP_AFTER": "1"})
    e.update(env or {})
    r = subprocess.run([DUMPLATER, str(tmp_path)] + ([mode] if mode else []), env=e,
                       capture_output=True, text=True, timeout=180)
    reports = [fltest.validate(json.load(open(p))) for p in tmp_path.glob("faultline-*.json")]
    return r, reports


def test_dump_after_takes_its_dump_by_helper_and_interrupts_no_thread(tmp_path):
    # A kernel timer's signal, then the signal dump's request to every
    # thread, made poll or nanosleep fail with EINTR: dumplater exited 2..4.
    r, reports = dump_later(tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(reports) == 1, r.stderr
    rep = reports[0]
    assert r.stdout.split() == ["report", next(tmp_path.glob("faultline-*.json")).name]
    assert rep["kind"] == "dump" and rep["capture"] == "ptrace", rep.get("capture_fallback")
    names = {t.get("name"): fltest.native_symbols(t) for t in rep["threads"]}
    assert "wait_in_poll" in names["poller"] and "wait_in_nanosleep" in names["sleeper"], names
    # The library's watchdog took it, from a call (faultline_dump_now).
    assert "faultline_dump_now" in names["faultline-later"], names
    assert rep["dumping_tid"] == [t["tid"] for t in rep["threads"]
                                  if t.get("name") == "faultline-later"][0]


def test_dump_after_exit_ends_the_job_with_status_1_after_the_report(tmp_path):
    r, reports = dump_later(tmp_path, "wait", {"FAULTLINE_DUMP_AFTER_EXIT": "1"})
    assert r.returncode == 1, r.stderr
    assert len(reports) == 1 and reports[0]["capture"] == "ptrace", r.stderr
    assert "dumplater:" not in r.stderr, r.stderr


@pytest.mark.parametrize("dump_signal", ["none", "SIGUSR2"])
def test_dump_after_without_the_helper_falls_back_to_the_signal_and_says_why(tmp_path,
                                                                             dump_signal):
    # With a dump signal too (FAULTLINE_DUMP=1), the watchdog, which blocks
    # it, calls the dump handler: a signal sent to itself stayed pending.
    env = {"FAULTLINE_DUMP_HELPER": "0"}
    if dump_signal != "none":
        env["FAULTLINE_DUMP"] = "1"
    r, reports = dump_later(tmp_path, "tolerant", env)
    assert r.returncode == 0, r.stderr
    assert len(reports) == 1, r.stderr
    rep = reports[0]
    assert rep["capture"] == "signal" and rep["capture_fallback"] == "FAULTLINE_DUMP_HELPER=0"
    names = {t.get("name"): fltest.native_symbols(t) for t in rep["threads"]}
    assert "wait_in_poll" in names["poller"] and "wait_in_nanosleep" in names["sleeper"], names


def test_a_fork_child_inherits_no_timed_dump_and_can_arm_its_own(tmp_path):
    # As a POSIX timer, the parent's timed dump is not inherited: the child
    # starts with no watchdog thread and nothing armed. Armed in the child,
    # its own is taken (a watchdog thought to be there would never fire).
    code = textwrap.dedent("""
        import ctypes, glob, json, os, sys, time
        lib = ctypes.CDLL(None)
        assert lib.faultline_dump_after(200, 0) == 0
        pid = os.fork()
        if pid == 0:
            threads = len(os.listdir("/proc/self/task"))
            mine = lambda: [p for p in glob.glob(sys.argv[1] + "/faultline-*.json")
                            if json.load(open(p))["process"]["pid"] == os.getpid()]
            # The parent's dump written: its deadline, ours if we had one, passed.
            while len(glob.glob(sys.argv[1] + "/faultline-*.json")) < 1:
                time.sleep(0.01)
            time.sleep(0.5)
            inherited = len(mine())
            assert lib.faultline_dump_after(1, 0) == 0
            for _ in range(6000):
                if mine():
                    break
                time.sleep(0.01)
            print(threads, inherited, len(mine()), flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)
        """)
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DIR": str(tmp_path)})
    r = subprocess.run(["/usr/bin/python3", "-c", code, str(tmp_path)], env=e,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # One thread (no watchdog), no dump of the parent's deadline, its own.
    assert r.stdout.split() == ["1", "0", "1", "0"], (r.stdout, r.stderr)
    assert len(list(tmp_path.glob("faultline-*.json"))) == 2



@pytest.mark.parametrize("mode", ["cancel", "fired"])
def test_the_watchdog_thread_ends_once_nothing_is_armed(tmp_path, mode):
    # It stayed parked after a cancel or its dump: the process stayed
    # multi-threaded, and unshare(CLONE_NEWUSER) failed with EINVAL.
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    alone = subprocess.run([DUMPLATER, str(tmp_path), mode], env=e, capture_output=True,
                           text=True, timeout=60)
    assert alone.stdout.split() == ["threads", "1", "unshare", alone.stdout.split()[3]]
    e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DIR": str(tmp_path)})
    r = subprocess.run([DUMPLATER, str(tmp_path), mode], env=e, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split()
    assert out[:2] == ["threads", "1"], (out, r.stderr)
    # Where unshare works without faultline, it works with it.
    if alone.stdout.split()[3] == "0":
        assert out[2:] == ["unshare", "0"], out
    assert len(list(tmp_path.glob("faultline-*.json"))) == (mode == "fired")


PY_LATER = """
import ctypes, glob, os, sys, threading, time
import faultline

libc = ctypes.CDLL(None, use_errno=True)
stop = False
eintr = 0

def poll_in_c():
    # libc's poll() through ctypes: Python's own calls retry after EINTR
    # (PEP 475) and would hide it.
    global eintr
    while not stop:
        rc = libc.poll(None, 0, 50)
        if rc != 0:
            eintr += 1
            os.write(2, f"poll returned {rc}: {os.strerror(ctypes.get_errno())}\\n".encode())

threading.Thread(target=poll_in_c, name="poll_in_c", daemon=True).start()
if sys.argv[1] == "exit":
    text = open(sys.argv[2] + "/text", "w")
    faultline.dump_traceback_later(0.5, exit=True, file=text)
    time.sleep(120)
    sys.exit(5)
faultline.dump_traceback_later(0.5, file=open(os.devnull, "w"))
while not glob.glob(sys.argv[2] + "/faultline-*.json"):
    time.sleep(0.01)
stop = True
print("eintr", eintr)
"""


def python_later(tmp_path, mode):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    e.update({"FAULTLINE_DIR": str(tmp_path), "FAULTLINE_LIB": fltest.LIB,
              "PYTHONPATH": os.path.join(fltest.SOURCE, "python")})
    prog = tmp_path / "job.py"
    prog.write_text(PY_LATER)
    r = subprocess.run([sys.executable, str(prog), mode, str(tmp_path)], env=e,
                       capture_output=True, text=True, timeout=180)
    reports = [fltest.validate(json.load(open(p))) for p in tmp_path.glob("faultline-*.json")]
    return r, reports


def test_python_dump_traceback_later_interrupts_no_thread(tmp_path):
    # The kernel timer's signal and the signal dump made libc's poll() fail
    # with EINTR in the other thread.
    r, reports = python_later(tmp_path, "go on")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["eintr", "0"], r.stderr
    assert len(reports) == 1 and reports[0]["capture"] == "ptrace", r.stderr
    threads = reports[0]["threads"]
    assert "faultline-later" in {t.get("name") for t in threads}
    inner = [[f["function"] for f in t["frames"] if f["kind"] == "python"][:1] for t in threads]
    assert ["poll_in_c"] in inner, inner


def test_python_dump_traceback_later_exit_comes_after_faulthandlers_text(tmp_path):
    r, reports = python_later(tmp_path, "exit")
    assert r.returncode == 1, r.stderr
    assert "poll returned" not in r.stderr, r.stderr
    assert len(reports) == 1 and reports[0]["capture"] == "ptrace", r.stderr
    text = (tmp_path / "text").read_text()
    # faulthandler's text, whole: every thread, the main one last.
    assert text.startswith("Timeout (0:00:00.500000)!\nThread 0x"), text
    assert "poll_in_c" in text and text.rstrip().endswith('line 23 in <module>'), text
