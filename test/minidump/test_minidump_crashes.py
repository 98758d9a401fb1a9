"""Minidumps of real crashes, read by an oracle that faultline did not write:
lldb-14 opens each crash test scenario's .dmp as a core file, and its
backtrace of every thread is checked against the JSON report written by the
same crash: the same threads (by tid), the crashing thread first with the
report's frames, and every other thread starting at the pc the report gives
(its registers come from that thread's own signal context); the crashing
thread's registers are the report's."""
import json
import os
import signal
import subprocess
import time

import pytest

import fltest
import lldb_minidump
from lldb_minidump import LLDB, function_names, is_subsequence

CRASHER = fltest.program("crasher")
THREADS = fltest.program("threads")
DRIVER = fltest.program("api_driver")
PYJOB = """
import ctypes, threading, time
def idle():
    time.sleep(60)
for _ in range(2):
    threading.Thread(target=idle, daemon=True).start()
time.sleep(0.2)
def inner():
    ctypes.string_at(0)
inner()
"""

# name -> (argv, signal, functions of the test program innermost first)
SCENARIOS = {
    "segv": ([CRASHER, "null-read"], "SIGSEGV", ["null_read", "level3", "level2", "level1", "main"]),
    "abort": ([CRASHER, "abort"], "SIGABRT", ["do_abort", "level3", "level2", "level1", "main"]),
    "fpe": ([CRASHER, "div-zero"], "SIGFPE", ["div_zero", "level3", "level2", "level1", "main"]),
    "ill": ([CRASHER, "ud2"], "SIGILL", ["ud2", "level3", "level2", "level1", "main"]),
    "bus": ([CRASHER, "sigbus"], "SIGBUS", ["do_sigbus", "level3", "level2", "level1", "main"]),
    "trap": ([CRASHER, "trap"], "SIGTRAP", ["do_trap", "level3", "level2", "level1", "main"]),
    "threads": ([THREADS, "many", "8"], "SIGSEGV", ["crash_now", "main"]),
    # sp in or next to the guard page: the stack window starts past it.
    "stack-overflow": ([CRASHER, "stack-overflow"], "SIGSEGV", ["recurse"] * 32),
    "uncaught-exception": ([DRIVER, "terminate-runtime"], "SIGABRT", ["throw_it", "main"]),
    "python": (["/usr/bin/python3", "-c", PYJOB], "SIGSEGV", []),
}

def native_pcs(thread):
    return [int(f["pc"], 16) for f in thread["frames"] if f["kind"] == "native"]


def crash(argv, tmp_path):
    env = {"FAULTLINE_MINIDUMP": "1", "FAULTLINE_STDERR": "0"}
    if argv[0] == DRIVER:  # linked, not preloaded
        r = fltest.run(argv, preload=False, env=dict(env, FAULTLINE_DIR=str(tmp_path)),
                       report_dir=str(tmp_path), timeout=120)
    else:
        r = fltest.run(argv, env=env, report_dir=str(tmp_path), timeout=120)
    return r


@pytest.mark.skipif(LLDB is None, reason="lldb-14 is not installed (tools/install-deps.sh)")
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_lldb_reads_the_minidump_of_every_crash(name, tmp_path):
    argv, signame, functions = SCENARIOS[name]
    r = crash(argv, tmp_path)
    assert r.returncode == -fltest.signum(signame), r.stderr
    rep = fltest.validate(r.report)
    assert rep["faultline"]["errors"] == [] or not any("minidump" in e for e in rep["faultline"]["errors"]), \
        rep["faultline"]["errors"]
    # Beside the report, under its name stem, and named by it.
    report_name = [n for n in os.listdir(tmp_path) if n.endswith(".json")][0]
    dump_name = rep["minidump"]
    assert dump_name == report_name[:-len(".json")] + ".dmp"
    dump = os.path.join(tmp_path, dump_name)
    assert os.path.getsize(dump) == rep["faultline"]["minidump_bytes"]
    assert rep["faultline"]["phases_ns"]["minidump"] > 0
    assert sorted(fltest.listdir(tmp_path)) == sorted([report_name, dump_name])  # no temporary left

    d = lldb_minidump.read(dump, argv[0])
    threads, modules, out = d.threads, d.modules, d.out
    # The same modules at the same addresses, each with the build-id the
    # report gives (lldb shows the CodeView record's 16 bytes, or the whole
    # build-id of the file it matched them with).
    assert len(modules) == len(rep["modules"]), out
    for m in rep["modules"]:
        uuid = modules.get(int(m["base"], 16))
        assert uuid is not None, f"{m['path']} at {m['base']}\n{out}"
        if m.get("build_id"):
            assert len(uuid) >= 32 and m["build_id"].startswith(uuid[:40]), f"{m['path']}: {uuid}\n{out}"
    # The same threads.
    assert sorted(t for t, _ in threads) == sorted(t["tid"] for t in rep["threads"]), out
    # lldb stops on the crashing thread, with the crash's signal.
    assert threads[0][0] == rep["crashed_tid"], out
    assert f"stop reason = signal {signame}" in out, out
    report_threads = {t["tid"]: t for t in rep["threads"]}
    crashed = fltest.crashed_thread(rep)
    ours = native_pcs(crashed)
    theirs = [pc for pc, _ in threads[0][1]]
    assert len(ours) >= 3 and len(theirs) >= 3, out
    # Frame 0 is the crash's pc (the signal context), and every frame of the
    # report is one of lldb's, in the same order (lldb adds inlined frames;
    # a 256-frame recursion goes deeper than the 32 KiB stack window).
    assert theirs[0] == ours[0], out
    # Its registers are the report's: both come from its signal context.
    regs = {name: int(value, 16) for name, value in crashed["registers"].items()}
    regs["rflags"] = regs.pop("eflags")
    for name in ["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "rip", "rflags"] + \
            [f"r{i}" for i in range(8, 16)]:
        assert d.registers.get(name) == regs[name], f"{name}: {d.registers.get(name)}\n{out}"
    ours = ours[:64]
    assert is_subsequence(ours, theirs), f"report {[hex(p) for p in ours]}\n{out}"
    # lldb names the test program's functions in call order.
    assert is_subsequence(functions, function_names(threads[0][1])), out
    # The other threads start where the report says: their own registers.
    for tid, frames in threads[1:]:
        t = report_threads[tid]
        if not t["captured"]:
            continue
        pcs = native_pcs(t)
        assert frames and frames[0][0] == pcs[0], f"thread {tid}\n{out}"
        assert is_subsequence(pcs, [pc for pc, _ in frames]), f"thread {tid}: {[hex(p) for p in pcs]}\n{out}"


def test_a_failed_minidump_costs_nothing_but_itself(tmp_path):
    # A file-size limit the report fits under and the minidump does not: the
    # minidump's write fails (EFBIG, not SIGXFSZ), its temporary file goes,
    # and the report is whole and says what failed.
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_STDERR="0",
               FAULTLINE_MINIDUMP="1")
    p = subprocess.run(["bash", "-c", 'ulimit -f 12 && exec "$0" null-read', CRASHER], env=env,
                       capture_output=True, timeout=120)
    assert p.returncode == -fltest.signum("SIGSEGV"), p.stderr
    names = fltest.listdir(tmp_path)
    assert len(names) == 1 and names[0].endswith(".json"), names
    with open(tmp_path / names[0]) as f:
        rep = fltest.validate(json.load(f))
    assert rep["minidump"] is None and "minidump_bytes" not in rep["faultline"]
    assert "minidump: not written: write failed (EFBIG)" in rep["faultline"]["errors"]
    assert fltest.crashed_thread(rep)["frames"][0]["symbol"] == "null_read"


def test_off_writes_no_minidump_and_live_dumps_have_none(tmp_path):
    r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_MINIDUMP": "0"})
    assert len(fltest.listdir(r.report_dir)) == 1 and r.report["minidump"] is None
    assert "minidump" not in r.report["faultline"]["phases_ns"]
    # A live dump: a report of the running process, no minidump.
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=str(tmp_path), FAULTLINE_STDERR="0",
               FAULTLINE_MINIDUMP="1", FAULTLINE_DUMP="1")
    p = subprocess.Popen([THREADS, "dump-wait", "2"], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        os.kill(p.pid, signal.SIGUSR2)
        for _ in range(1000):
            if [n for n in os.listdir(tmp_path) if n.endswith(".json")]:
                break
            time.sleep(0.01)
    finally:
        p.stdin.close()
        assert p.wait(timeout=60) == 0
    names = fltest.listdir(tmp_path)
    assert len(names) == 1 and names[0].endswith(".json"), names
    with open(tmp_path / names[0]) as f:
        rep = json.load(f)
    assert rep["kind"] == "dump" and rep["minidump"] is None


def test_the_watchdog_skips_the_minidump_not_the_report(tmp_path):
    # The user callback hangs until the watchdog's first stage: the slow
    # phases after it, the minidump among them, are skipped, the report is
    # written, and no minidump or temporary file is left behind.
    r = fltest.run([DRIVER, "slow-callback-worker"], preload=False, report_dir=str(tmp_path),
                   env={"FAULTLINE_DIR": str(tmp_path), "FAULTLINE_WATCHDOG": "2", "FAULTLINE_MINIDUMP": "1"},
                   timeout=60)
    assert r.returncode == -fltest.signum("SIGSEGV"), r.stderr
    rep = fltest.validate(r.report)
    errors = rep["faultline"]["errors"]
    assert any(e.startswith("minidump:") for e in errors), errors
    assert rep["minidump"] is None
    assert len(fltest.listdir(tmp_path)) == 1, fltest.listdir(tmp_path)
