"""A live dump asked for by the dump signal (FAULTLINE_DUMP=1: `kill -USR2`,
`faultline dump --method signal`) is taken by the library's ptrace helper,
as faultline_dump_now()'s is: only the thread the signal landed on can see
a system call cut short (EINTR), never every thread, as the signal request
to every thread did. Without the helper (FAULTLINE_DUMP_HELPER=0) the dump
is the signal request's and the report says why; a crash during a helper
dump is reported and ends the process by its signal (the first law)."""
import ctypes
import json
import os
import platform
import signal
import subprocess
import time

import pytest

import fltest
from test_dump_now import _under_seccomp

pytestmark = pytest.mark.skipif(_under_seccomp(),
                                reason="the tests run under a seccomp filter: dumps go by signal")

SIGWAITERS = fltest.program("sigwaiters")
SLOWPIPE = fltest.program("slowpipe")
SYS_TGKILL = {"x86_64": 234, "aarch64": 131}[platform.machine()]
# Program functions a thread may be interrupted in (the dump signal lands on
# any thread that does not block it).
PROGRAM_CODE = {"main", "wait_in_poll", "wait_in_epoll", "wait_in_nanosleep"}


def start(tmp_path, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DIR": str(tmp_path), "FAULTLINE_DUMP": "1"})
    e.update(env or {})
    p = subprocess.Popen([SIGWAITERS], env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    waiting_in_their_calls(p)
    return p


def waiting_in_their_calls(p):
    """Returns once the poll, epoll_wait and nanosleep threads wait in their
    calls (past the start-up barrier's futex): a signal before that cuts
    nothing short."""
    futex = {"x86_64": 202, "aarch64": 98}[platform.machine()]
    for _ in range(6000):
        calls = []
        for name in ("poller", "epoller", "sleeper"):
            with open(f"/proc/{p.pid}/task/{thread_named(p.pid, name)}/syscall") as f:
                calls.append(f.read().split()[0])
        if all(c not in ("running", str(futex)) for c in calls):
            return
        time.sleep(0.01)
    raise AssertionError(f"the waiters never waited: {calls}")


def eintr(p):
    p.stdin.write("check\n")
    p.stdin.flush()
    line = p.stdout.readline().split()
    assert line and line[0] == "eintr", (p.poll(), p.stderr.read())
    return [int(n) for n in line[1:]]


def wait_for_reports(tmp_path, n, p):
    """The reports once there are n (a generous bound: not a timing test)."""
    for _ in range(6000):
        paths = sorted(tmp_path.glob("faultline-*.json"))
        if len(paths) >= n:
            return [json.load(open(x)) for x in paths]
        assert p.poll() is None, p.stderr.read()
        time.sleep(0.01)
    raise AssertionError(f"fewer than {n} reports in {tmp_path}")


def finish(p):
    p.stdin.write("quit\n")
    p.stdin.close()
    return p.wait(timeout=60)


def check_helper_report(rep, pid):
    fltest.validate(rep)
    assert rep["kind"] == "dump" and rep["capture"] == "ptrace", rep.get("capture")
    assert "capture_fallback" not in rep, rep["capture_fallback"]
    # The thread the signal landed on, stopped in faultline's handler: its
    # stack shows that (faultline::core::helper_dump, called by the
    # handler), then the program code the signal interrupted.
    asked = [t for t in rep["threads"] if t["tid"] == rep["dumping_tid"]]
    assert len(asked) == 1, rep["dumping_tid"]
    syms = [s or "" for s in fltest.native_symbols(asked[0])]
    handler = [i for i, s in enumerate(syms) if "helper_dump" in s]
    assert handler, syms
    assert PROGRAM_CODE & set(syms[handler[0]:]), syms
    assert len(rep["threads"]) == 4
    assert rep["process"]["pid"] == pid


def test_dump_signal_interrupts_at_most_the_thread_it_lands_on(tmp_path):
    # Today's handler sends the stack request to every thread: the poll,
    # epoll_wait and nanosleep threads all count an EINTR at each dump.
    p = start(tmp_path)
    try:
        before = eintr(p)
        for i in range(5):
            os.kill(p.pid, signal.SIGUSR2)
            check_helper_report(wait_for_reports(tmp_path, i + 1, p)[-1], p.pid)
            now = eintr(p)
            touched = [w for w in range(3) if now[w] != before[w]]
            assert len(touched) <= 1, (i, before, now)
            before = now
        # `faultline dump --method signal`: the same dump (the command finds
        # it as the report the signal made), asked of the main thread.
        r = fltest.cli("dump", "--method", "signal", "--print-path", str(p.pid), timeout=120)
        assert r.returncode == 0, r.stderr
        check_helper_report(json.load(open(r.stdout.strip().splitlines()[-1])), p.pid)
        # Sent to the one thread whose call restarts (main, in read): none
        # of the waiters saw EINTR.
        assert f"signalled thread {p.pid} of process {p.pid}" in r.stderr, r.stderr
        assert eintr(p) == before
        assert len(list(tmp_path.glob("faultline-*.json"))) == 6
    finally:
        assert finish(p) == 0, p.stderr.read()


def test_dump_signal_goes_to_a_thread_in_futex_not_one_in_write_or_read(tmp_path):
    # A write that has moved some bytes returns a short count when a handler
    # runs on its thread, and a read of a socket with a timeout fails with
    # EINTR: `faultline dump --method signal` sent the signal to the first
    # thread in read, write or futex, here the main thread, in write.
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DIR": str(tmp_path), "FAULTLINE_DUMP": "1"})
    p = subprocess.Popen([SLOWPIPE], env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        nr = {"x86_64": {"write": 1, "read": 0, "futex": 202},
              "aarch64": {"write": 64, "read": 63, "futex": 98}}[platform.machine()]
        joiner = thread_named(p.pid, "joiner")
        reader = thread_named(p.pid, "reader")
        waits = {p.pid: nr["write"], reader: nr["read"], joiner: nr["futex"]}
        for _ in range(6000):
            calls = {}
            for tid in waits:
                with open(f"/proc/{p.pid}/task/{tid}/syscall") as f:
                    calls[tid] = f.read().split()[0]
            if calls == {tid: str(n) for tid, n in waits.items()}:
                break
            time.sleep(0.01)
        else:
            raise AssertionError(f"the threads never waited: {calls}")
        r = fltest.cli("dump", "--method", "signal", str(p.pid), timeout=120)
        assert r.returncode == 0, r.stderr
        assert f"signalled thread {joiner} of process {p.pid} (waiting in futex" in r.stderr
        rep = fltest.validate(wait_for_reports(tmp_path, 1, p)[0])
        assert rep["capture"] == "ptrace" and rep["dumping_tid"] == joiner
        # The helper took it by ptrace, but a signal was sent (the header
        # said "no signal sent").
        assert f"Live dump of process {p.pid} (by ptrace, asked by SIGUSR2 " in r.stdout
        p.stdin.write("drain\n")
        p.stdin.flush()
        assert p.wait(timeout=60) == 0, p.stderr.read()
        # Not asserted: the full count. The helper's ptrace stop of the
        # writing thread shortens its write too (as `faultline dump` by
        # ptrace does), which the choice of thread cannot help.
        out = p.stdout.read().split()
        assert out[0] == "wrote" and out[2] == "read" and out[1] == out[3], out
    finally:
        p.kill()
        p.wait()


def thread_named(pid, name):
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == name:
                return int(tid)
    raise AssertionError(f"no thread {name} in {pid}")


def test_the_thread_the_signal_lands_on_is_the_only_one_interrupted(tmp_path):
    # Sent to the poll thread itself: its poll fails with EINTR (a handler
    # ran), the epoll_wait and nanosleep threads see nothing.
    libc = ctypes.CDLL(None, use_errno=True)
    p = start(tmp_path)
    try:
        poller = thread_named(p.pid, "poller")
        for i in range(3):
            assert libc.syscall(SYS_TGKILL, p.pid, poller, signal.SIGUSR2) == 0
            rep = wait_for_reports(tmp_path, i + 1, p)[-1]
            check_helper_report(rep, p.pid)
            assert rep["dumping_tid"] == poller
            syms = fltest.native_symbols([t for t in rep["threads"] if t["tid"] == poller][0])
            assert "wait_in_poll" in syms, syms
            assert eintr(p) == [i + 1, 0, 0]
    finally:
        assert finish(p) == 0, p.stderr.read()


def test_without_the_helper_the_signal_request_dumps_and_says_why(tmp_path):
    p = start(tmp_path, {"FAULTLINE_DUMP_HELPER": "0"})
    try:
        os.kill(p.pid, signal.SIGUSR2)
        rep = fltest.validate(wait_for_reports(tmp_path, 1, p)[0])
        assert rep["kind"] == "dump" and rep["capture"] == "signal"
        assert rep["capture_fallback"] == "FAULTLINE_DUMP_HELPER=0"
        # The stack request reached every waiter (why the helper is used):
        # each counts its EINTR once its handler has returned, which may be
        # after the report is on disk.
        for _ in range(6000):
            counts = eintr(p)
            if all(n >= 1 for n in counts):
                break
            time.sleep(0.01)
        assert counts == [1, 1, 1], counts
    finally:
        assert finish(p) == 0, p.stderr.read()


def test_a_crash_during_a_helper_dump_is_reported_and_ends_the_job(tmp_path):
    # The helper command first makes a thread of the job crash, then dumps:
    # the crash waits for the dump's owner, which gives the helper up.
    fifo = tmp_path / "crash.fifo"
    os.mkfifo(fifo)
    wrapper = tmp_path / "faultline-wrapper"
    wrapper.write_text(f"#!/bin/sh\nprintf x > '{fifo}'\nexec '{fltest.CLI}' \"$@\"\n")
    wrapper.chmod(0o755)
    reports = tmp_path / "reports"
    reports.mkdir()
    p = start(reports, {"SIGWAITERS_CRASH_FIFO": str(fifo), "FAULTLINE_CLI": str(wrapper)})
    os.kill(p.pid, signal.SIGUSR2)
    try:
        rc = p.wait(timeout=120)
    finally:
        p.kill()
    assert rc == -signal.SIGSEGV, (rc, p.stderr.read())
    reps = [fltest.validate(r) for r in fltest.reports_in(str(reports))]
    crashes = [r for r in reps if r["kind"] == "crash"]
    assert len(crashes) == 1, [r["kind"] for r in reps]
    assert crashes[0]["signal"]["name"] == "SIGSEGV"
    crashed = fltest.crashed_thread(crashes[0])
    assert "crash_when_told" in fltest.native_symbols(crashed)
