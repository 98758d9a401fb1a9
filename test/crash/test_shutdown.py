"""Shutdown reports: under torchrun (TORCHELASTIC_RUN_ID set), or with
FAULTLINE_SHUTDOWN_REPORTS=1, the first SIGTERM or SIGINT leaves a report of
kind "shutdown" with every thread's stacks, and then takes its normal
course: the program's own handler (Python's KeyboardInterrupt, a Python
SIGTERM handler), else the default action, else nothing when the program
ignores it. The program keeps its own view of both signals
(signal.getsignal). The oracle is the same program without faultline:
exit status, output and getsignal answers must be the same."""
import os
import signal
import subprocess
import sys
import tempfile

import pytest

import fltest
import pyenvs

# Waits where a collective would: the report's Python frames must show it.
PROGRAM = r"""
import ctypes, os, signal, sys, threading, time
mode = sys.argv[1]
if mode == "handler":
    def on_term(signo, frame):
        print("handled", flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, on_term)
elif mode == "interrupt":
    def all_reduce_stand_in():
        try:
            print("ready", flush=True)
            time.sleep(3600)
        except KeyboardInterrupt:
            print("cleanup", flush=True)
            sys.exit(3)
    all_reduce_stand_in()
elif mode == "continue":
    # The program's handler goes on (a checkpoint): a thread blocked in a
    # system call sees no EINTR; a later SIGINT is Python's alone.
    signal.signal(signal.SIGTERM, lambda s, f: print("handled", flush=True))
    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()
    def reader():
        buf = ctypes.create_string_buffer(1)
        n = libc.read(r, buf, 1)
        print("worker read", n, "errno", ctypes.get_errno(), flush=True)
    t = threading.Thread(target=reader, name="reader")
    t.start()
    def all_reduce_stand_in():
        print("ready", flush=True)
        sys.stdin.readline()  # the test's go-ahead, after its SIGTERM
    def sync_grads():
        all_reduce_stand_in()
    sync_grads()
    os.write(w, b"x")
    t.join()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(3600)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    sys.exit(0)
elif mode == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif mode == "restored":
    old = signal.signal(signal.SIGTERM, lambda s, f: None)
    signal.signal(signal.SIGTERM, old)  # a library's save and restore: SIG_DFL again
threading.Thread(target=lambda: time.sleep(3600), daemon=True, name="worker").start()
def all_reduce_stand_in():
    print("ready", flush=True)
    if mode == "ignore":
        sys.stdin.readline()  # the test's go-ahead, after its SIGTERM
        sys.exit(0)
    while True:
        time.sleep(3600)
def sync_grads():
    all_reduce_stand_in()
sync_grads()
"""

TORCHRUN = {"TORCHELASTIC_RUN_ID": "stop-test", "RANK": "1", "WORLD_SIZE": "2",
            "LOCAL_RANK": "1", "GROUP_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "0"}


def pythons():
    """The interpreters the program's view is checked with: this one and
    pyenv's oldest and newest supported."""
    found = [pytest.param(sys.executable, id="this")]
    for minor in ("3.8", "3.11", "3.13"):
        prefix = pyenvs.pyenv_prefix(minor)
        found.append(pytest.param(os.path.join(prefix, "bin", "python3") if prefix else None,
                                  id="pyenv-" + minor))
    return found


def clean_env(env):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("FAULTLINE_", "TORCHELASTIC_")) and k != "LD_PRELOAD"}
    e.update(env)
    return e


def run_and_stop(mode, signo, env, preload=True, python=sys.executable):
    """Starts the program, sends SIGNO once it is ready; returns (status, reports, stdout)."""
    report_dir = tempfile.mkdtemp(prefix="faultline-shutdown-")
    e = clean_env(env)
    if preload:
        e["LD_PRELOAD"] = fltest.LIB
        e["FAULTLINE_DIR"] = report_dir
    p = subprocess.Popen([python, "-c", PROGRAM, mode], env=e, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signo)
    if mode in ("ignore", "continue"):
        p.stdin.write("go\n")
        p.stdin.flush()
    out, err = p.communicate(timeout=60)
    return p.returncode, fltest.reports_in(report_dir), out, err


def python_functions(report):
    return [f["function"] for t in report["threads"] for f in t.get("frames", [])
            if f.get("kind") == "python"]


# Default settings under torchrun. The program's own handlers are installed
# after faultline's (CPython's KeyboardInterrupt handler at start-up, a
# Python SIGTERM handler): faultline stays in front, reports, then hands the
# signal on.
@pytest.mark.parametrize("mode,signo", [("default", signal.SIGTERM), ("handler", signal.SIGTERM),
                                        ("interrupt", signal.SIGINT),
                                        ("restored", signal.SIGTERM)])
@pytest.mark.parametrize("python", pythons())
def test_shutdown_report_then_the_signals_own_course(mode, signo, python):
    python = pyenvs.require(python)
    baseline, _, base_out, _ = run_and_stop(mode, signo, TORCHRUN, preload=False, python=python)
    status, reports, out, err = run_and_stop(mode, signo, TORCHRUN, python=python)
    assert status == baseline, err
    assert out == base_out  # the program's own handler ran (or did not) as without faultline
    assert {"default": -signal.SIGTERM, "handler": 7, "interrupt": 3,
            "restored": -signal.SIGTERM}[mode] == status
    (rep,) = reports
    fltest.validate(rep)
    assert rep["kind"] == "shutdown"
    assert rep["signal"]["name"] == signal.Signals(signo).name
    assert rep["diagnosis"]["category"] == "shutdown"
    assert rep["job"]["run_id"] == "stop-test" and rep["job"]["rank"] == 1
    fns = python_functions(rep)
    # Python frames where faultline's walker knows the interpreter (3.9 on).
    walked = "/3.8." not in python
    assert "all_reduce_stand_in" in fns or not walked, fns
    if mode in ("default", "restored"):
        assert "sync_grads" in fns or not walked
        assert len(rep["threads"]) >= 2  # every thread, the sleeping worker too
    elif mode == "handler":
        # The program's handler takes over and the process may go on: no
        # other thread is stopped (its system calls would see EINTR); their
        # Python stacks are still there.
        others = [t for t in rep["threads"] if not t.get("crashed")]
        assert others and not any(t.get("captured") for t in others), others
        assert all("not interrupted" in t.get("note", "") for t in others), others
        assert any(f.get("kind") == "python" for t in others for f in t.get("frames", [])) or not walked
    # A stopped rank is no crash: no fatal-error text for log scrapers to
    # count, one line that says what the report is.
    assert "Fatal Python error" not in err and "Current thread" not in err, err
    assert "faultline: " in err and "shutdown" in err, err


def test_a_handler_that_goes_on_leaves_other_threads_alone_and_one_report():
    baseline, _, base_out, _ = run_and_stop("continue", signal.SIGTERM, TORCHRUN, preload=False)
    status, reports, out, err = run_and_stop("continue", signal.SIGTERM, TORCHRUN)
    assert base_out == "handled\nworker read 1 errno 0\ninterrupted\n" and baseline == 0
    assert (status, out) == (baseline, base_out), err
    # The first signal's report; the later SIGINT is the program's alone.
    (rep,) = reports
    assert rep["kind"] == "shutdown" and rep["signal"]["name"] == "SIGTERM"


def test_ignored_sigterm_stays_ignored_without_a_report():
    baseline, _, _, _ = run_and_stop("ignore", signal.SIGTERM, TORCHRUN, preload=False)
    status, reports, _, err = run_and_stop("ignore", signal.SIGTERM, TORCHRUN)
    assert baseline == 0 and status == 0, err
    assert reports == []


def test_nothing_changes_by_default_outside_torchrun():
    status, reports, _, err = run_and_stop("default", signal.SIGTERM, {})
    assert status == -signal.SIGTERM and reports == [], err
    status, reports, out, err = run_and_stop("interrupt", signal.SIGINT, {})
    assert (status, out, reports) == (3, "cleanup\n", []), err


# What libraries do with the handlers: ask, save and restore, ignore for a
# while. Printed answers, compared with the same program's without faultline.
PROBE = r"""
import signal, sys
for s in (signal.SIGTERM, signal.SIGINT):
    print(signal.Signals(s).name, signal.getsignal(s))
    old = signal.signal(s, lambda n, f: None)
    print("saved", old)
    signal.signal(s, old)  # the save-and-restore libraries do
    print("restored", signal.getsignal(s))
    signal.signal(s, signal.SIG_IGN)
    print("ignored", signal.getsignal(s))
    signal.signal(s, old)
    print("back", signal.getsignal(s))
"""


@pytest.mark.parametrize("python", pythons())
def test_python_sees_sigterm_and_sigint_as_without_faultline(python):
    python = pyenvs.require(python)
    outs = []
    for preload in (False, True):
        e = clean_env(TORCHRUN)
        if preload:
            e["LD_PRELOAD"] = fltest.LIB
        p = subprocess.run([python, "-c", PROBE], env=e, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        outs.append(p.stdout)
    assert "default_int_handler" in outs[0]
    assert outs[1] == outs[0]


def test_an_inherited_ignore_of_sigterm_is_kept():
    # A launcher (nohup, a service manager) made SIGTERM ignored: it stays
    # ignored in the process and its children, and nothing is reported.
    e = clean_env(dict(TORCHRUN, LD_PRELOAD=fltest.LIB))
    script = "import os, sys; print(open('/proc/self/status').read().split('SigIgn:')[1].split()[0])"
    p = subprocess.run([sys.executable, "-c", script], env=e, capture_output=True, text=True,
                       timeout=60,
                       preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    assert p.returncode == 0, p.stderr
    assert int(p.stdout, 16) & (1 << (signal.SIGTERM - 1)), p.stdout


def test_the_setting_turns_it_on_and_off():
    status, reports, _, err = run_and_stop("default", signal.SIGTERM,
                                           {"FAULTLINE_SHUTDOWN_REPORTS": "1"})
    assert status == -signal.SIGTERM, err
    (rep,) = reports
    assert rep["kind"] == "shutdown" and "job" not in fltest.validate(rep)
    for mode, signo, rc in (("default", signal.SIGTERM, -signal.SIGTERM),
                            ("interrupt", signal.SIGINT, 3)):
        status, reports, _, err = run_and_stop(mode, signo,
                                               dict(TORCHRUN, FAULTLINE_SHUTDOWN_REPORTS="0"))
        assert status == rc and reports == [], err


def test_without_the_program_s_view_sigint_is_left_alone():
    # FAULTLINE_STAY_IN_FRONT=0: no interposer to keep CPython's view, so no
    # shutdown reports by default and never for SIGINT (KeyboardInterrupt
    # needs CPython to see SIG_DFL at start-up).
    env = dict(TORCHRUN, FAULTLINE_STAY_IN_FRONT="0")
    status, reports, _, err = run_and_stop("default", signal.SIGTERM, env)
    assert status == -signal.SIGTERM and reports == [], err
    status, reports, out, err = run_and_stop("interrupt", signal.SIGINT,
                                             dict(env, FAULTLINE_SHUTDOWN_REPORTS="1"))
    assert (status, out, reports) == (3, "cleanup\n", []), err


# Second signals while a report is being written. shutsig counts SIGINTs in
# its own handler and carries on; 100 idle threads make the report take a
# while. The test sends the second signal once the report's file appears in
# the directory (the thread writing it is still in faultline's handler): the
# kernel hands a process's signal to the thread that is running, the one
# writing. The oracle is the same program without faultline, sent the same
# signals a moment apart.
def shutsig_env(preload, report_dir, extra=None):
    e = clean_env(dict(FAULTLINE_SHUTDOWN_REPORTS="1", **(extra or {})))
    if preload:
        e["LD_PRELOAD"] = fltest.LIB
        e["FAULTLINE_DIR"] = report_dir
    return e


def status_of(st):
    return -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)


def until_a_file_in(report_dir, count=1):
    """Returns once report_dir holds `count` files (a report being written
    under its temporary name counts); without faultline, after a while
    (long enough for the first signal to be taken, under load too: two
    pending at once would be one)."""
    import time
    if report_dir is None:
        time.sleep(0.2)
        return
    for _ in range(200000):
        if len(os.listdir(report_dir)) >= count:
            return
        time.sleep(0.00005)
    raise AssertionError("no report appeared in " + report_dir)


def on_a_terminal(args, env, before_first, between):
    """Runs shutsig on a pty of its own; once it is ready, calls
    before_first(pid), types ^C, calls between(pid) and, unless that returns
    False, types ^C again. Returns (status, the program's last line)."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execve(fltest.program("shutsig"), ["shutsig"] + args, env)
        finally:
            os._exit(127)
    buf = b""
    while b"ready" not in buf:
        buf += os.read(fd, 4096)
    before_first(pid)
    os.write(fd, b"\x03")
    if between(pid) is not False:
        os.write(fd, b"\x03")
    out = b""
    while True:
        try:
            d = os.read(fd, 4096)
        except OSError:
            break
        if not d:
            break
        out += d
    _, st = os.waitpid(pid, 0)
    os.close(fd)
    # The terminal echoes ^C in front of the program's line.
    lines = [l[l.index("SIGINT handled"):] for l in out.decode(errors="replace").splitlines()
             if "SIGINT handled" in l]
    return status_of(st), lines, out.decode(errors="replace")


def report_kinds(report_dir):
    return [r["kind"] for r in fltest.reports_in(report_dir)]


def test_a_second_ctrl_c_during_the_report_reaches_the_program():
    # A terminal's ^C comes from the kernel (SI_KERNEL), as a fault would:
    # it was taken for a fault inside the handler (no report, killed by
    # SIGINT) or swallowed.
    nothing = lambda pid: None
    base = on_a_terminal(["100", "2"], shutsig_env(False, None), nothing,
                         lambda pid: until_a_file_in(None))
    assert base[:2] == (0, ["SIGINT handled 2 times, SIGTERM 0"]), base
    for _ in range(8):
        d = tempfile.mkdtemp(prefix="faultline-shutdown-")
        got = on_a_terminal(["100", "2"], shutsig_env(True, d), nothing,
                            lambda pid: until_a_file_in(d))
        assert got[:2] == base[:2], got
        assert report_kinds(d) == ["shutdown"]


def test_sigterm_after_sigint_during_the_report_still_ends_the_process():
    # What torchrun does on ^C: SIGINT to the ranks, SIGTERM a moment
    # later. The program's SIGINT handler goes on, SIGTERM's default ends
    # it. The SIGTERM was dropped on the thread writing the SIGINT report.
    for preload in (False, True):
        for _ in range(1 + 5 * preload):
            d = tempfile.mkdtemp(prefix="faultline-shutdown-")
            p = subprocess.Popen([fltest.program("shutsig"), "100", "2"],
                                 env=shutsig_env(preload, d), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            assert p.stdout.readline() == "ready\n"
            p.send_signal(signal.SIGINT)
            until_a_file_in(d if preload else None)
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=60)
            assert p.returncode == -signal.SIGTERM, (preload, err)
            if preload:
                assert report_kinds(d) == ["shutdown"], err


def test_ctrl_c_during_a_live_dump_is_taken_after_it():
    # A ^C that lands on the thread writing a live dump (SIGUSR2) was taken
    # for a fault inside the handler: the process died of SIGINT. It is
    # kept and delivered after the dump: a shutdown report, then the
    # program's handler, which goes on as without faultline.
    for _ in range(6):
        d = tempfile.mkdtemp(prefix="faultline-shutdown-")

        def dump(pid):
            os.kill(pid, signal.SIGUSR2)
            until_a_file_in(d)

        got = on_a_terminal(["100", "1"], shutsig_env(True, d, {"FAULTLINE_DUMP": "1"}), dump,
                            lambda pid: False)
        assert got[:2] == (0, ["SIGINT handled 1 times, SIGTERM 0"]), got
        assert sorted(report_kinds(d)) == ["dump", "shutdown"]


def test_the_program_s_sigterm_handler_sees_the_real_sender():
    # Handed on with its siginfo: the sender's pid and SI_USER, not the
    # process's own pid and SI_TKILL.
    outs = []
    for preload in (False, True):
        d = tempfile.mkdtemp(prefix="faultline-shutdown-")
        p = subprocess.Popen([fltest.program("shutsig"), "0", "1", "info"],
                             env=shutsig_env(preload, d), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline() == "ready\n"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(out)
    assert outs[0] == "SIGINT handled 0 times, SIGTERM 1 from pid %d si_code %d\n" % (
        os.getpid(), 0)
    assert outs[1] == outs[0]
