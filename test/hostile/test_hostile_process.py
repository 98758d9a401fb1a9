"""A crashing process hostile to its own report: every thread, every time
(hundreds of threads, threads that block every signal or overflow their
stack, simultaneous crashes), a heap or descriptor table in ruins, forks and
execs, signal handlers and signal stacks of its own that fight faultline's,
a dead stderr, phases that hang until the watchdog cuts them, live dumps
taken while it runs. Each test is a real crashing process; the world around
it is test_hostile_environment.py's."""
import json
import os
import resource
import shutil
import signal
import subprocess
import time

import pytest

import fltest

THREADS = fltest.program("threads")
CRASHER = fltest.program("crasher")


def others(rep):
    return [t for t in rep["threads"] if not t.get("crashed")]


def test_all_threads_have_native_stacks():
    r = fltest.run([THREADS, "many", "9"])
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert rep["threads_total"] == 10 and len(rep["threads"]) == 10
    crashed = fltest.crashed_thread(rep)
    assert fltest.native_symbols(crashed)[:2] == ["crash_now", "main"]
    waits = {"wait_forever_in_cond": 0, "wait_forever_in_sleep": 0, "wait_forever_in_read": 0}
    for t in others(rep):
        assert t["captured"] is True, t
        syms = fltest.native_symbols(t)
        assert "waiter" in syms
        for w in waits:
            if w in syms:
                waits[w] += 1
        assert t["name"] == "threads"
    assert waits == {"wait_forever_in_cond": 3, "wait_forever_in_sleep": 3, "wait_forever_in_read": 3}


def test_200_live_threads_are_all_listed():
    r = fltest.run([THREADS, "many", "199"], timeout=120)
    rep = fltest.validate(r.report)
    assert rep["threads_total"] == 200 and len(rep["threads"]) == 200
    captured = [t for t in rep["threads"] if t["captured"]]
    assert len(captured) == 200


def test_thread_cap_summarises_the_rest():
    r = fltest.run([THREADS, "many", "20"], env={"FAULTLINE_MAX_THREADS": "5"})
    rep = fltest.validate(r.report)
    assert len(rep["threads"]) == 21
    assert rep["threads_cut"] == 16
    assert sum(1 for t in rep["threads"] if t["captured"]) == 5
    cut = [t for t in rep["threads"] if "thread cap" in (t.get("note") or "")]
    assert len(cut) == 16


def test_stack_overflow_in_a_worker_thread():
    r = fltest.run([THREADS, "worker-overflow"])
    base = fltest.run([THREADS, "worker-overflow"], preload=False)
    assert r.returncode == base.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    t = fltest.crashed_thread(rep)
    assert t["tid"] != rep["process"]["pid"]
    assert rep["diagnosis"]["category"] == "stack-overflow"
    assert fltest.native_symbols(t)[:50] == ["overflow"] * 50
    assert t["frames_truncated"] is True


def test_thread_with_all_signals_blocked_is_listed_not_captured():
    # Not sent the request at all (it would stay pending for a sigwait()
    # to take): listed with the reason, at once.
    r = fltest.run([THREADS, "blocked"], env={"FAULTLINE_THREAD_TIMEOUT_MS": "60000"})
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    [t] = others(rep)
    assert t["captured"] is False and t["frames"] == []
    assert "blocks the thread-dump signal" in t["note"], t["note"]
    assert t["state"] in ("S", "D", "R")


def test_thread_that_never_answers_is_listed_not_captured():
    r = fltest.run([THREADS, "unanswering"], env={"FAULTLINE_THREAD_TIMEOUT_MS": "200"})
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    [t] = others(rep)
    assert t["captured"] is False and t["frames"] == []
    assert "did not answer" in t["note"]
    assert t["state"] in ("S", "D", "R")
    assert any("did not answer" in e for e in rep["faultline"]["errors"])


def test_simultaneous_crashes_make_exactly_one_report():
    for _ in range(3):
        r = fltest.run([THREADS, "simultaneous", "8"], timeout=60)
        assert r.returncode == -signal.SIGSEGV
        rep = fltest.validate(r.report)  # exactly one report
        t = fltest.crashed_thread(rep)
        assert fltest.native_symbols(t)[0] == "simultaneous_crash"
        for oc in rep["other_crashes"]:
            assert oc["signal"] == "SIGSEGV" and oc["tid"] != t["tid"]
        # Other threads that crashed are listed with their crash stacks.
        # Threads that had crashed when asked for their stacks answer with
        # their crash context.
        for t2 in others(rep):
            if "crashed too" in (t2.get("note") or ""):
                assert any(oc["tid"] == t2["tid"] for oc in rep["other_crashes"])
                assert fltest.native_symbols(t2)[0] == "simultaneous_crash"


def test_crash_while_another_thread_hammers_malloc():
    r = fltest.run([THREADS, "malloc-busy"], timeout=60)
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert fltest.native_symbols(fltest.crashed_thread(rep))[0] == "crash_now"


def test_abort_inside_malloc_with_a_corrupt_heap():
    r = fltest.run([THREADS, "double-free"])
    assert r.returncode == -signal.SIGABRT
    rep = fltest.validate(r.report)
    syms = fltest.native_symbols(fltest.crashed_thread(rep))
    assert "main" in syms
    assert "free(): double free" in r.stderr or "double free" in r.stderr


def test_file_descriptors_exhausted():
    r = fltest.run([THREADS, "fd-exhaust"])
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert fltest.native_symbols(fltest.crashed_thread(rep))[0] == "crash_now"


def test_forked_child_writes_its_own_report():
    r = fltest.run([THREADS, "fork-child"])
    assert r.returncode == 0
    child_pid = int(r.stdout.split()[1])
    assert r.stdout.split()[2:] == ["signal", "11"]
    rep = fltest.validate(r.report)
    assert rep["process"]["pid"] == child_pid
    assert rep["process"]["ppid"] != child_pid


def test_exec_keeps_faultline():
    r = fltest.run([THREADS, "exec", CRASHER, "null-read"])
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert rep["process"]["executable"].endswith("crasher")


def test_faulthandler_coexists():
    job = "import ctypes\ndef f():\n    ctypes.c_int64.from_address(16).value\nf()\n"
    r = fltest.run(["/usr/bin/python3", "-X", "faulthandler", "-c", job])
    base = fltest.run(["/usr/bin/python3", "-X", "faulthandler", "-c", job], preload=False)
    assert r.returncode == base.returncode == -signal.SIGSEGV
    # faulthandler's own output and faultline's report, both.
    assert "Fatal Python error: Segmentation fault" in r.stderr
    assert 'File "<string>", line 3 in f' in r.stderr
    rep = fltest.validate(r.report)
    assert rep["signal"]["name"] == "SIGSEGV"


def test_live_dumps_leave_the_process_healthy():
    d = fltest.run(["true"], preload=False).report_dir
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=d, FAULTLINE_DUMP="1",
               FAULTLINE_STDERR="0")
    p = subprocess.Popen([THREADS, "dump-wait", "3"], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"

    def published():
        # A dump in progress is a hidden temporary file; only published reports count.
        return [n for n in os.listdir(d) if n.startswith("faultline-") and n.endswith(".json")]

    for i in range(100):
        before = len(published())
        os.kill(p.pid, signal.SIGUSR2)
        deadline = time.time() + 10
        while len(published()) == before and time.time() < deadline:
            time.sleep(0.002)
        assert len(published()) == before + 1, f"dump {i} not written"
    p.stdin.close()
    assert p.wait(timeout=30) == 0
    names = sorted(os.listdir(d))
    assert names == sorted(published()), names  # no temporary file left behind
    reports = []
    for n in names:
        with open(os.path.join(d, n)) as f:
            reports.append(json.load(f))
    assert len(reports) == 100 or len({r["timestamp"] for r in reports}) >= 1
    rep = fltest.validate(reports[-1])
    assert rep["kind"] == "dump" and rep["crashed_tid"] is None
    assert len(rep["threads"]) == 4
    assert all(t["captured"] for t in rep["threads"])


def test_gdb_thread_apply_all_bt_agrees(tmp_path):
    if open("/proc/sys/kernel/core_pattern").read().strip() != "core":
        pytest.skip("needs core_pattern 'core'")
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_STDERR="0")
    subprocess.run([THREADS, "many", "6"], cwd=tmp_path, env=env, capture_output=True,
                   preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (-1, -1)))
    [name] = [n for n in os.listdir(tmp_path) if n.startswith("faultline-")]
    rep = json.load(open(tmp_path / name))
    out = subprocess.run(["gdb", "-batch", "-nx", "-ex", "thread apply all bt", THREADS,
                          str(tmp_path / "core")], capture_output=True, text=True, timeout=120).stdout
    import re
    gdb_threads = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"^Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP (\d+)\)", line)
        if m:
            current = int(m.group(1))
            gdb_threads[current] = []
            continue
        m = re.match(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(\S+) \(", line)
        if m and current is not None:
            gdb_threads[current].append((int(m.group(1)), m.group(2), m.group(3)))
    assert len(gdb_threads) == 7, out
    compared = 0
    for t in rep["threads"]:
        ours = [(int(f["pc"], 16), f.get("symbol")) for f in t["frames"]]
        our_pcs = [pc for pc, _ in ours]
        # gdb lists inlined frames without a pc; every frame it gives a pc
        # for must be ours, in the same order.
        gdb_pcs = [int(pc, 16) for _, pc, _ in gdb_threads[t["tid"]] if pc]
        if not t["crashed"]:
            # A waiting thread answered our signal and then went on inside
            # its system call until the process died: its innermost
            # (physical) frame may differ from the core's.
            while gdb_pcs and gdb_pcs[0] not in our_pcs[1:]:
                gdb_pcs.pop(0)
            assert len(gdb_pcs) >= 3
        it = iter(our_pcs)
        assert all(pc in it for pc in gdb_pcs), f"thread {t['tid']}: {our_pcs} vs {gdb_pcs}\n{out}"
        # Names of the test program's own frames agree exactly.
        for _, pc, name in gdb_threads[t["tid"]]:
            if pc and int(pc, 16) in our_pcs:
                sym = ours[our_pcs.index(int(pc, 16))][1]
                if name in ("waiter", "wait_forever_in_cond", "wait_forever_in_sleep",
                            "wait_forever_in_read", "main"):
                    assert sym == name
                    compared += 1
    assert compared >= 12


@pytest.mark.parametrize("env", [{}, {"FAULTLINE_STAY_IN_FRONT": "0"}])
def test_a_later_handler_that_exits_without_handing_the_signal_on(env):
    # A runtime-like handler that never chains and _exits: it runs first
    # (faultline in front, the default) or alone (FAULTLINE_STAY_IN_FRONT=0);
    # either way the process ends as it chose, and no report is left.
    r = fltest.run([CRASHER, "own-handler"], env=env)
    assert r.returncode == 3 and "own handler ran" in r.stderr and r.reports == []


def test_report_first_for_a_later_handler_that_exits():
    # FAULTLINE_CHAIN_ORDER=report-first: faultline reports first, then hands
    # the signal to the program's handler, which behaves as before.
    r = fltest.run([CRASHER, "own-handler"], env={"FAULTLINE_CHAIN_ORDER": "report-first"})
    assert r.returncode == 3 and "own handler ran" in r.stderr
    rep = fltest.validate(r.report)
    assert fltest.native_symbols(fltest.crashed_thread(rep))[0] == "null_read"
    assert r.stderr.index("report written") < r.stderr.index("own handler ran")


def test_faulthandler_behind_faultline_in_front():
    job = "import ctypes\ndef f():\n    ctypes.c_int64.from_address(16).value\nf()\n"
    r = fltest.run(["/usr/bin/python3", "-X", "faulthandler", "-c", job])
    assert r.returncode == -signal.SIGSEGV
    assert 'File "<string>", line 3 in f' in r.stderr
    fltest.validate(r.report)
    # faulthandler, installed after faultline and kept behind it, runs
    # first: its text, then (its reset and re-raise meaning to die)
    # faultline's native stack and report; the Python text once.
    assert r.stderr.count("Current thread 0x") == 1
    assert r.stderr.index("report written") > r.stderr.rindex("Current thread 0x")


def test_program_that_closes_and_reuses_our_descriptors():
    # Dumps must never close or write the program's files, and a crash after
    # the report directory's descriptor was closed still lands in the directory.
    r = fltest.run([THREADS, "reuse-fds"], env={"FAULTLINE_DUMP": "1", "FAULTLINE_STDERR": "0"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "descriptors intact" in r.stdout
    assert len(r.reports) == 3 and all(rep["kind"] == "dump" for rep in r.reports)
    r = fltest.run([THREADS, "reuse-fds", "crash"], env={"FAULTLINE_DUMP": "1"})
    assert r.returncode == -signal.SIGSEGV
    crashes = [rep for rep in r.reports if rep["kind"] == "crash"]
    assert len(crashes) == 1
    fltest.validate(crashes[0])


def test_spares_are_told_from_the_programs_descriptors_where_kcmp_is_denied():
    # The spares are a pipe only faultline holds: the program's own opens of
    # the report directory and its duplicates of one file (stdout twice), at
    # the spares' numbers, are left open. kcmp is denied (as some container
    # profiles do): nothing here may depend on it.
    launcher = fltest.program("seccomp_launcher")
    r = fltest.run([launcher, "-d", "312:1", THREADS, "reuse-fds"],  # kcmp: EPERM
                   env={"FAULTLINE_DUMP": "1", "FAULTLINE_STDERR": "0"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "descriptors intact" in r.stdout
    assert len(r.reports) == 3 and all(rep["kind"] == "dump" for rep in r.reports)


def test_small_signal_stack_on_the_crashing_thread():
    # faulthandler and others replace the main thread's signal stack with a
    # small one; faultline moves to its own crash stack.
    r = fltest.run([THREADS, "small-altstack"])
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert fltest.native_symbols(fltest.crashed_thread(rep))[:2] == ["crash_now", "main"]


def test_small_signal_stack_on_another_thread():
    r = fltest.run([THREADS, "small-altstack-worker"])
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    [main] = [t for t in rep["threads"] if t["tid"] == rep["process"]["pid"]]
    assert main["captured"] and "main" in fltest.native_symbols(main)
    assert "wait_forever_in_sleep" in fltest.native_symbols(main)


def test_dead_stderr_does_not_lose_the_report():
    # The job's log reader went away: writing stderr raises SIGPIPE/EPIPE.
    import tempfile
    d = tempfile.mkdtemp(prefix="faultline-test-")
    rfd, wfd = os.pipe()
    os.close(rfd)
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=d)
    p = subprocess.run([CRASHER, "null-read"], env=env, stderr=wfd, timeout=30)
    os.close(wfd)
    assert p.returncode == -signal.SIGSEGV
    [name] = [n for n in os.listdir(d) if n.startswith("faultline-")]
    fltest.validate(json.load(open(os.path.join(d, name))))


def test_forked_children_crash_while_the_parent_takes_dumps():
    r = fltest.run([THREADS, "fork-while-dumping", "5"], env={"FAULTLINE_DUMP": "1", "FAULTLINE_STDERR": "0"},
                   timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:5] == ["signal 11"] * 5, r.stdout
    crashes = [rep for rep in r.reports if rep["kind"] == "crash"]
    assert len(crashes) == 5
    assert len({rep["process"]["pid"] for rep in crashes}) == 5


def test_stderr_pipe_nobody_reads_does_not_hold_the_handler(tmp_path):
    # stderr is a full pipe: the report file still lands, and the process
    # still dies promptly with its own signal.
    import fcntl
    import time
    rfd, wfd = os.pipe()
    fcntl.fcntl(wfd, fcntl.F_SETFL, os.O_NONBLOCK)
    try:
        while True:
            os.write(wfd, b"x" * 65536)
    except BlockingIOError:
        pass
    fcntl.fcntl(wfd, fcntl.F_SETFL, 0)
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=str(tmp_path))
    t0 = time.monotonic()
    p = subprocess.run([CRASHER, "null-read"], env=env, stderr=wfd, timeout=60)
    elapsed = time.monotonic() - t0
    os.close(wfd)
    os.close(rfd)
    assert p.returncode == -signal.SIGSEGV
    assert elapsed < 8, elapsed  # well under the 10 s watchdog
    [name] = [n for n in os.listdir(tmp_path) if n.startswith("faultline-")]
    fltest.validate(json.load(open(tmp_path / name)))


def test_watchdog_cuts_a_hung_phase_short_and_still_reports():
    # libunwind blocks on the loader's lock another thread holds forever.
    import time
    t0 = time.monotonic()
    r = fltest.run([THREADS, "loader-lock"],
                   env={"FAULTLINE_WATCHDOG": "2", "FAULTLINE_UNWINDER": "libunwind"}, timeout=60)
    elapsed = time.monotonic() - t0
    assert r.returncode == -signal.SIGSEGV
    assert elapsed < 10, elapsed
    rep = fltest.validate(r.report)
    assert any("watchdog" in e for e in rep["faultline"]["errors"]), rep["faultline"]["errors"]
    assert "faultline: watchdog:" in r.stderr


def test_watchdog_cuts_the_wait_for_a_thread_that_never_answers():
    # A thread timeout past the watchdog's: the first stage jumps out of the
    # wait for the thread that never answers, and the answers so far
    # are kept. The frames are still named and classified after it (they
    # were skipped: bare addresses, and a crash signature of its own), and
    # the cut is said to be the watchdog's, not a fault's.
    r = fltest.run([THREADS, "unanswering"],
                   env={"FAULTLINE_WATCHDOG": "1", "FAULTLINE_THREAD_TIMEOUT_MS": "60000"},
                   timeout=40)
    assert r.returncode == -signal.SIGSEGV
    assert 'capture phase "threads" took too long' in r.stderr, r.stderr
    rep = fltest.validate(r.report)
    errors = rep["faultline"]["errors"]
    assert "threads: out of time (watchdog); the answers so far kept" in errors, errors
    assert not any("fault while" in e for e in errors), errors
    [t] = others(rep)
    assert not t["captured"] and "did not answer" in t["note"]
    [crashed] = [t for t in rep["threads"] if t.get("crashed")]
    assert fltest.native_symbols(crashed)[0] == "crash_now"
    assert rep["diagnosis"]["summary"].endswith("in threads!crash_now"), rep["diagnosis"]


def test_symbols_past_the_grace_period_are_cut_and_the_report_still_written(tmp_path):
    # After the first stage the symbols still run; reading the symbol
    # tables slowly (every pread made 0.3 s longer by strace: a cold cache,
    # a slow network filesystem) takes them past the grace period, and the
    # second stage lands on the owner (the other thread never answers). The owner gave up there with no report at all; it now leaves
    # the phase and writes the report.
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=str(tmp_path),
               FAULTLINE_WATCHDOG="1", FAULTLINE_THREAD_TIMEOUT_MS="60000")
    r = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", "trace=pread64",
                        "-e", "inject=pread64:delay_exit=300000", THREADS, "unanswering"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGSEGV or r.returncode == 128 + signal.SIGSEGV, r.stderr
    assert 'capture phase "symbols" ran past the grace period' in r.stderr, r.stderr
    [name] = [n for n in os.listdir(tmp_path) if n.startswith("faultline-")]
    rep = fltest.validate(json.load(open(tmp_path / name)))
    assert "symbols: out of time (watchdog)" in rep["faultline"]["errors"], rep["faultline"]["errors"]


def test_cfi_unwinder_does_not_wait_for_the_loaders_lock():
    # The same program: another thread holds the loader's lock forever. The
    # CFI unwinder takes no lock, so no phase hangs and every stack is there.
    r = fltest.run([THREADS, "loader-lock"], env={"FAULTLINE_WATCHDOG": "30", "FAULTLINE_UNWINDER": "cfi"},
                   timeout=60)
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert not any("watchdog" in e for e in rep["faultline"]["errors"]), rep["faultline"]["errors"]
    assert all(t["unwinder"].startswith("cfi") for t in rep["threads"] if t["frames"])
    assert len([t for t in rep["threads"] if t["frames"]]) >= 2


def test_kill_abrt_during_a_live_dump_still_kills():
    r = fltest.run([THREADS, "abrt-during-dump"], env={"FAULTLINE_DUMP": "1", "FAULTLINE_STDERR": "0"},
                   timeout=60)
    assert r.returncode == -signal.SIGABRT, (r.returncode, r.stdout)
    assert "still alive" not in r.stdout
    kinds = sorted(rep["kind"] for rep in r.reports)
    assert kinds == ["crash", "dump"], kinds
    crash = [rep for rep in r.reports if rep["kind"] == "crash"][0]
    fltest.validate(crash)
    assert crash["signal"]["name"] == "SIGABRT" and crash["signal"]["code_name"] == "SI_USER"


SIGSTACK = fltest.program("sigstack")


def test_a_thread_on_a_small_signal_stack_stays_inside_it():
    # A thread asked for its stack unwinds itself where its signal stack has
    # room for the unwinder (kCfiStackBytes), else parks for the owner. Over
    # sizes around that threshold, on a painted stack with a guard page
    # below, read through process_vm_readv and through the pipe: the thread
    # always answers and leaves at least 1 KiB unused; from 16 KiB on it
    # unwinds itself, within 11 KiB, whichever reader it uses.
    for size in range(12 << 10, 33 << 10, 1 << 10):
        used = {}
        for reader in ("process_vm_readv", "pipe"):
            args = [SIGSTACK, str(size)] + (["pipe"] if reader == "pipe" else [])
            # The signal request's live dump (the helper's sends no thread
            # a stack request).
            r = fltest.run(args, env={"FAULTLINE_DUMP": "1", "FAULTLINE_DUMP_HELPER": "0"})
            assert r.returncode == 0, (size, reader, r.stderr)
            used[reader] = int(r.stdout.split()[1])
            assert used[reader] + 1024 <= size, (size, reader, used)
            rep = fltest.validate(r.report)
            [main] = [t for t in rep["threads"] if t["tid"] == rep["process"]["pid"]]
            assert main["captured"] and "wait_deep" in fltest.native_symbols(main), (size, main)
            if reader == "pipe":
                assert rep["faultline"]["safe_read"] == "pipe"
        if size >= 16 << 10:
            # Unwound itself (a parked thread uses ~3 KiB: the signal frame).
            assert 6 << 10 < used["process_vm_readv"] <= 11 << 10, (size, used)
        assert abs(used["pipe"] - used["process_vm_readv"]) <= 512, (size, used)

def test_a_thread_on_an_autodisarm_signal_stack_stays_inside_it():
    # SS_AUTODISARM (for programs that switch contexts out of a handler):
    # inside a handler sigaltstack says the signal stack is disabled, so a
    # thread asked for its stack took itself to be on its own stack and
    # unwound there; on 8 KiB the live dump overran the stack and killed the
    # process. Where it runs now comes from the stack the kernel saved in
    # the signal's context: below kCfiStackBytes it parks, from 16 KiB it
    # unwinds itself.
    for size in (8 << 10, 12 << 10, 16 << 10):
        r = fltest.run([SIGSTACK, str(size), "autodisarm"],
                       env={"FAULTLINE_DUMP": "1", "FAULTLINE_DUMP_HELPER": "0"})
        assert r.returncode == 0, (size, r.returncode, r.stderr)
        used = int(r.stdout.split()[1])
        assert used + 1024 <= size, (size, used)
        if size < 16 << 10:
            assert used <= 6 << 10, (size, used)  # parked: the signal frame only
        rep = fltest.validate(r.report)
        [main] = [t for t in rep["threads"] if t["tid"] == rep["process"]["pid"]]
        assert main["captured"] and "wait_deep" in fltest.native_symbols(main), (size, main)


def test_a_live_dump_never_touches_what_was_mapped_over_an_exited_threads_stack(tmp_path):
    # A thread exited after replacing the signal stack faultline gave it; a
    # file is mapped where faultline's stack was, and another thread (not
    # started by faultline) has the exited one's id. The dump's populate of
    # signal stacks must not reach the file (no block allocated).
    data = tmp_path / "sparse.dat"
    r = fltest.run([fltest.program("stalestack"), str(data)], env={"FAULTLINE_DUMP": "1"})
    assert r.returncode == 0, r.stderr
    if r.stdout.strip() == "no-reuse":
        pytest.skip("could not reuse a thread id (needs root for ns_last_pid)")
    _, before, after = r.stdout.split()
    assert before == after == "0", r.stdout
    assert len(r.reports) == 1 and r.reports[0]["kind"] == "dump"


def test_a_fork_childs_dump_never_touches_what_was_mapped_over_its_exited_threads_stack(tmp_path):
    # The forking thread (one faultline started) exits in the child; its
    # stack's registry entry under the parent-side id must go with it.
    data = tmp_path / "sparse.dat"
    for _ in range(5):  # the freed range may be taken by another mapping first
        r = fltest.run([fltest.program("forkstale"), str(data)], env={"FAULTLINE_DUMP": "1"})
        assert r.returncode == 0, r.stderr
        if not r.stdout.startswith("no-map"):
            break
    out = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    if out == "no-reuse" or out.startswith("no-map"):
        pytest.skip("could not set the scene: " + out)
    _, before, after = out.split()
    assert before == after == "0", r.stdout


def test_threads_that_cannot_be_signalled_are_not_called_exited():
    # RLIMIT_SIGPENDING reached: the kernel refuses the thread-dump signal
    # (a real-time signal) with EAGAIN. Those threads were noted as having
    # exited; they are listed, noted as not asked, with their /proc state,
    # and the capture does not wait for them.
    if not shutil.which("prlimit"):
        pytest.skip("needs prlimit")
    r = fltest.run(["prlimit", "--sigpending=0", THREADS, "many", "3"])
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    rest = others(rep)
    assert len(rest) == 3
    for t in rest:
        assert t["captured"] is False, t
        assert "RLIMIT_SIGPENDING" in t["note"], t["note"]
        assert t["state"] in ("S", "D", "R"), t
    assert not any("did not answer" in e for e in rep["faultline"]["errors"])


def crash_after_a_live_dump(argv, tmp_path, printed):
    """Runs argv under FAULTLINE_DUMP=1 (SIGUSR2 asks for a live dump);
    checks that it printed `printed`, then crashed with SIGSEGV leaving one
    crash report in which every other thread was captured. The live dump is
    the signal request's (FAULTLINE_DUMP_HELPER=0), whose stack requests to
    every thread are what the crash after it must recover from."""
    r = fltest.run(argv, env={"FAULTLINE_DUMP": "1", "FAULTLINE_DUMP_HELPER": "0"},
                   report_dir=str(tmp_path), timeout=60)
    assert printed in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])
    assert r.returncode == -signal.SIGSEGV, r.stderr[-2000:]
    crash = [rep for rep in r.reports if rep["kind"] == "crash"]
    assert len(crash) == 1
    assert all(t["captured"] for t in others(crash[0]))
    return r


RECLAIM_JOB = r"""
import ctypes, os, signal, sys, threading, time
got = []
signal.signal(int(sys.argv[1]), lambda s, f: got.append(s))
def poke():
    signal.pthread_kill(threading.main_thread().ident, int(sys.argv[1]))
    time.sleep(0.05)
poke()
ev = threading.Event()
threading.Thread(target=ev.wait, daemon=True).start()
time.sleep(0.05)
os.kill(os.getpid(), signal.SIGUSR2)  # a live dump
time.sleep(0.5)
poke()  # the program's own use of its signal still reaches its handler
print("got", len(got), flush=True)
ctypes.string_at(0)
"""


def test_program_that_takes_the_thread_dump_signal_still_gets_every_stack(tmp_path):
    # A program that installs its own handler for faultline's thread-dump
    # signal (Python's signal.signal, a profiler's timer signal) took it
    # over: no thread answered, and the report said "did not answer". The
    # capture puts faultline's handler back and hands the program's own
    # uses of the signal on to the program's handler.
    job = tmp_path / "job.py"
    job.write_text(RECLAIM_JOB)
    signo = signal.SIGRTMAX - 3  # FAULTLINE_THREAD_SIGNAL's default
    r = crash_after_a_live_dump(["/usr/bin/python3", str(job), str(signo)], tmp_path, "got 2")
    kinds = sorted(rep["kind"] for rep in r.reports)
    assert kinds == ["crash", "dump"], kinds
    for rep in r.reports:
        fltest.validate(rep)
        rest = others(rep)
        assert rest and all(t["captured"] for t in rest), [t.get("note") for t in rest]
    dump = [rep for rep in r.reports if rep["kind"] == "dump"][0]
    assert any("replaced faultline's handler of the thread-dump signal" in e
               for e in dump["faultline"]["errors"]), dump["faultline"]["errors"]


CHAINING_JOB = r"""
import ctypes, faulthandler, os, signal, sys, threading, time
signo = int(sys.argv[1])
sink = open(os.devnull, "w")
# Registered after faultline: faulthandler's handler hands the signal on to
# the one it replaced (faultline's) by putting it back and raising it.
faulthandler.register(signo, file=sink, chain=True)
ev = threading.Event()
threading.Thread(target=ev.wait, daemon=True).start()
time.sleep(0.05)
os.kill(os.getpid(), signal.SIGUSR2)  # a live dump: faultline's handler is put back
time.sleep(0.5)
signal.pthread_kill(threading.main_thread().ident, signo)
time.sleep(0.05)
print("alive", flush=True)
ctypes.string_at(0)
"""


def test_program_handler_that_chains_back_to_faultline_does_not_loop(tmp_path):
    # After a capture took the thread-dump signal back, a handler that hands
    # the signal on to the one it replaced (faultline's) was called by
    # faultline, which called it again: endless recursion, a crash.
    job = tmp_path / "job.py"
    job.write_text(CHAINING_JOB)
    signo = signal.SIGRTMAX - 3
    crash_after_a_live_dump(["/usr/bin/python3", str(job), str(signo)], tmp_path, "alive")


def test_more_threads_in_the_programs_handler_at_once_than_faultline_tracks(tmp_path):
    # Faultline hands the program's own uses of the thread-dump signal on to
    # its handler, guarding each thread against a handler that hands it back
    # in a loop with one of 256 slots. With every slot taken, the rest must
    # still reach the program's handler (unguarded), not be dropped: here
    # 300 threads are inside it at once, each waiting for all the others.
    signo = signal.SIGRTMAX - 3
    r = fltest.run([fltest.program("sigcrowd"), str(signo), "300"], env={"FAULTLINE_DUMP": "1"},
                   report_dir=str(tmp_path), timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    assert "inside 300 done 300" in r.stdout
    assert [rep["kind"] for rep in r.reports] == ["dump"]


def test_program_handler_that_jumps_out_keeps_getting_its_signal(tmp_path):
    # The program's handler of the thread-dump signal leaves by siglongjmp,
    # so faultline's hand-on never returns: the next call from the same
    # place must not be taken for the handler handing the signal back (it
    # would be dropped, and every later one with it).
    signo = signal.SIGRTMAX - 3
    crash_after_a_live_dump([fltest.program("sigjump"), str(signo)], tmp_path, "calls 3")
