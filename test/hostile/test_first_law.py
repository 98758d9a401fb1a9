"""The first law: with faultline present a job ends exactly as it would have
without it. Each test is a real process whose other threads wait in system
calls that a signal would make fail (poll, epoll_wait, select, nanosleep) or
that collect signals themselves (sigwait), while one thread crashes."""
import signal

import pytest

import fltest

FIRSTLAW = fltest.program("firstlaw")


def others(rep):
    return [t for t in rep["threads"] if not t.get("crashed")]


def test_main_sleeping_beside_a_crash_ends_by_the_crash_with_a_report():
    # Without faultline: killed by SIGSEGV. Answering the stack request must
    # not end main's sleep(5) early (it would return 0 before the report).
    without = fltest.run([FIRSTLAW, "sleep-main"], preload=False)
    assert without.returncode == -signal.SIGSEGV
    r = fltest.run([FIRSTLAW, "sleep-main"])
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    rep = fltest.validate(r.report)
    assert "crash_now" in fltest.native_symbols(fltest.crashed_thread(rep))
    [main] = others(rep)
    assert main["captured"] is True, main


def test_waiters_treating_eintr_as_fatal_never_see_it_in_100_runs():
    # poll, epoll_wait, select and nanosleep are never restarted after a
    # handler: a thread let go before the process ends sees EINTR and exits
    # 2..5 with no report. 100 of 100 must end by the crash, with one report.
    outcomes = {}
    for _ in range(100):
        r = fltest.run([FIRSTLAW, "waiters"])
        key = (r.returncode, len(r.reports))
        outcomes[key] = outcomes.get(key, 0) + 1
        if key != (-signal.SIGSEGV, 1):
            print(r.stderr)
    assert outcomes == {(-signal.SIGSEGV, 1): 100}, outcomes


def test_python_register_of_the_thread_stack_signal_is_refused(tmp_path):
    # Signal 61 answers stack requests; registered as the dump signal it did
    # nothing at all (no dump, no text, no error).
    import os
    import subprocess
    script = tmp_path / "job.py"
    script.write_text(
        "import faultline\n"
        "try:\n"
        "    faultline.register(61)\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
        "else:\n"
        "    print('accepted')\n")
    env = {"PYTHONPATH": os.path.join(fltest.SOURCE, "python"), "FAULTLINE_LIB": fltest.LIB,
           "FAULTLINE_DIR": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin")}
    p = subprocess.run(["/usr/bin/python3", str(script)], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("refused:"), p.stdout + p.stderr
    assert "thread-stack signal" in p.stdout and "FAULTLINE_THREAD_SIGNAL" in p.stdout


# A job with a graceful shutdown of its own on SIGUSR2 (it prints and exits
# 0), preloaded without FAULTLINE_DUMP, or with it and then replacing
# faultline's handler. SigCgt says "caught" either way.
SHUTDOWN_ON_USR2 = """
import os, signal, sys
def shutdown(signo, frame):
    print("graceful shutdown", flush=True)
    os._exit(0)
signal.signal(signal.SIGUSR2, shutdown)
print(os.getpid(), flush=True)
sys.stdin.readline()
"""


WAITER = """
import os, sys
print(os.getpid(), flush=True)
sys.stdin.readline()
"""


def start_job(tmp_path, env, code=SHUTDOWN_ON_USR2):
    """Starts `code` under the preload (reports in tmp_path); returns the
    process and its pid, which it prints once ready."""
    import os
    import subprocess
    prog = tmp_path / "job.py"
    prog.write_text(code)
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DIR": str(tmp_path)}, **env)
    p = subprocess.Popen(["/usr/bin/python3", str(prog)], env=e, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline())


def stop_job(p):
    """Ends a job started by start_job (a line on its stdin); its output."""
    p.stdin.write("\n")
    p.stdin.close()
    assert p.wait(timeout=30) == 0
    return p.stdout.read()


@pytest.mark.parametrize("env", [{}, {"FAULTLINE_DUMP": "1"}], ids=["no-dump", "replaced-later"])
def test_dump_never_signals_a_job_whose_program_handles_the_signal(tmp_path, env):
    p, pid = start_job(tmp_path, env)
    try:
        r = fltest.cli("dump", "--method", "signal", "--timeout", "3", str(pid), timeout=60)
        assert r.returncode == 1, r.stderr
        assert "not with faultline's dump handler" in r.stderr, r.stderr
        assert p.poll() is None, "the job was shut down by the dump's signal"
    finally:
        assert "graceful shutdown" not in stop_job(p)


SPAWNED_THEN_WAITS = """
import os, subprocess, sys
subprocess.run(["/bin/true"], check=True)
print(os.getpid(), flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("code", [WAITER, SPAWNED_THEN_WAITS], ids=["waits", "spawned-first"])
def test_dump_still_works_where_faultline_handles_the_signal(tmp_path, code):
    # spawned-first: CPython's subprocess resets every handler in a vfork()
    # child, in memory shared with the job; that took faultline's dump mark
    # away from the job itself, and the dump was refused.
    p, pid = start_job(tmp_path, {"FAULTLINE_DUMP": "1"}, code)
    try:
        r = fltest.cli("dump", "--method", "signal", "--print-path", "--timeout", "20", str(pid),
                       timeout=60)
        assert r.returncode == 0, r.stderr
        assert p.poll() is None
    finally:
        stop_job(p)


def test_dump_of_another_users_process_says_permission_was_refused(tmp_path):
    import os
    import shutil
    import subprocess
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to act as another user")
    p, pid = start_job(tmp_path, {"FAULTLINE_DUMP": "1"}, WAITER)
    try:
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            fltest.CLI, "dump", "--timeout", "3", str(pid)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "has not loaded" not in r.stderr, r.stderr
        assert "permission" in r.stderr and "as the job's user or as root" in r.stderr, r.stderr
        assert p.poll() is None
    finally:
        stop_job(p)


def test_a_sigwait_daemon_crashing_ends_by_the_crash_with_a_report():
    # Every asynchronous signal blocked, one thread collecting them with
    # sigwait() and shutting down cleanly (exit 0) on any: the stack request
    # sent to it was taken as its own signal.
    without = fltest.run([FIRSTLAW, "sigwait"], preload=False)
    assert without.returncode == -signal.SIGSEGV
    r = fltest.run([FIRSTLAW, "sigwait"])
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr)
    assert "shutting down" not in r.stdout
    rep = fltest.validate(r.report)
    assert "crash_now" in fltest.native_symbols(fltest.crashed_thread(rep))
    blocked = [t for t in others(rep) if not t["captured"]]
    assert blocked and all("blocks the thread-dump signal" in t["note"] for t in blocked), blocked


def test_a_hung_crash_callback_beside_a_sigwait_thread_ends_within_the_watchdog(tmp_path):
    # The watchdog's alarm() was process-directed: the sigwait thread took
    # SIGALRM, and the hung callback hung the process for good. Timed out
    # by the test (60 s) if it hangs; the watchdog is 2 s.
    r = fltest.run([FIRSTLAW, "sigwait-hang"], preload=False, timeout=60,
                   env={"FAULTLINE_DIR": str(tmp_path)})
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr)
    assert "shutting down" not in r.stdout
    assert "faultline: watchdog:" in r.stderr, r.stderr


# A program that sets a seccomp filter making one system call fatal, then
# crashes (test/programs/seccompfatal.c). Without faultline it dies by
# SIGSEGV. A crash handler that makes the forbidden call would end it by
# SIGSYS, by SIGKILL (strict mode), or, where the filter kills only the
# calling thread, not at all: the crashing thread vanished and the program
# exited 0 with no report. faultline reads the filter before it goes in and
# steps aside; a filter that leaves its calls alone, or only refuses them
# with an error, keeps the report.
SECCOMPFATAL = fltest.program("seccompfatal")
STEPS_ASIDE = [
    ["seccomp", "kill_process", "openat"],
    ["prctl", "trap", "process_vm_readv"],
    ["prctl", "kill_thread", "openat", "thread"],
    ["seccomp", "kill_thread", "uname", "thread"],
    ["seccomp", "kill_process", "tgkill", "thread"],
    ["strict"],
    # Refused with an error, a call that hands the crash on: no core, and
    # _exit(139) where the kernel would have killed it.
    ["seccomp", "errno", "rt_sigaction"],
    # Two filters: the first refuses process_vm_readv (the pipe stands in),
    # the second kills the pipe.
    ["prctl", "errno", "process_vm_readv", "kill_process", "pipe2"],
]


@pytest.mark.parametrize("args", STEPS_ASIDE, ids=["-".join(a) for a in STEPS_ASIDE])
def test_a_seccomp_filter_fatal_to_the_crash_path_leaves_the_crash_its_own_fate(args):
    without = fltest.run([SECCOMPFATAL, *args], preload=False)
    assert without.returncode == -signal.SIGSEGV, without.stderr
    r = fltest.run([SECCOMPFATAL, *args])
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    assert r.reports == []
    err = r.stderr
    assert "faultline: a seccomp filter would stop the crash handler" in err, err
    assert ("strict mode" if args == ["strict"] else args[-2 if args[-1] == "thread" else -1]) in err, err


KEEPS_REPORTING = [
    ["seccomp", "errno", "process_vm_readv"],
    ["prctl", "kill_process", "mknodat"],
    ["badptr"],
    ["refused"],  # a filter the kernel refuses (EINVAL) changes nothing
    ["uninit"],
]


@pytest.mark.parametrize("args", KEEPS_REPORTING, ids=["-".join(a) for a in KEEPS_REPORTING])
def test_a_seccomp_filter_that_spares_the_crash_path_keeps_the_report(args):
    r = fltest.run([SECCOMPFATAL, *args])
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    assert len(r.reports) == 1, r.stderr
    rep = fltest.validate(r.reports[0])
    assert "crash_now" in fltest.native_symbols(fltest.crashed_thread(rep))
    assert "seccomp filter" not in r.stderr


def test_stepping_aside_waits_for_a_live_dump_in_progress():
    # A live dump (by signal: FAULTLINE_DUMP=1, SIGUSR2) of 100 threads, and
    # 1-3 ms later the program sets a filter faultline steps aside for.
    # Uninstalling in the middle of the dump took the stack request signal
    # back to its default action while requests were still being sent: the
    # job was killed by signal 61 in up to half the runs.
    import os
    import subprocess
    import tempfile
    import time
    outcomes = {}
    for i in range(10):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=d, FAULTLINE_DUMP="1")
            env.pop("FAULTLINE_DUMP_HELPER", None)
            p = subprocess.Popen([SECCOMPFATAL, "dumprace"], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            assert p.stdout.readline() == b"ready\n"
            os.kill(p.pid, signal.SIGUSR2)
            time.sleep(0.001 * (1 + i % 3))
            out, _ = p.communicate(b"x", timeout=60)
            key = (p.returncode, out)
            outcomes[key] = outcomes.get(key, 0) + 1
    assert outcomes == {(0, b"alive\n"): 10}, outcomes
