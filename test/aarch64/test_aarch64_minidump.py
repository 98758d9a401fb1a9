"""The minidump on aarch64 (FAULTLINE_MINIDUMP=1) under qemu-user, read by
an oracle faultline did not write: lldb-14 on this x86-64 machine opens the
.dmp with the cross-built program as its main module and the cross sysroot
as where the others are. Checked against the JSON report of the same
crash: the architecture, the same threads, the crashing thread's registers
(the same signal context), its backtrace, every other captured thread
starting at the pc the report gives, and the FP/SIMD state (v0-v31, fpcr,
fpsr) as the program left it.

lldb stops at the first return address signed by pointer authentication (a
minidump carries no PAC mask): the whole backtraces are compared on the
program built without it; with it, as far as lldb gets."""
import glob
import json
import os
import signal
import subprocess

import pytest

import arm64
import lldb_minidump
from lldb_minidump import function_names, is_subsequence

CHAIN = ["chain_leaf", "chain_middle", "chain_outer"]

pytestmark = pytest.mark.skipif(lldb_minidump.LLDB is None,
                                reason="lldb-14 is not installed (tools/install-deps.sh)")


def crash_with_minidump(program, mode, lib, tmp_path):
    """Runs the program to its SIGSEGV with the minidump on; returns the
    report and what lldb reads in the minidump."""
    r = arm64.run([program, mode], cwd=tmp_path, preload=lib,
                  env={"FAULTLINE_DIR": str(tmp_path), "FAULTLINE_MINIDUMP": "1",
                       "FAULTLINE_STDERR": "0"})
    assert r.returncode == -signal.SIGSEGV, r.stderr
    reports = glob.glob(str(tmp_path / "faultline-*.json"))
    assert len(reports) == 1, os.listdir(tmp_path)
    with open(reports[0]) as f:
        report = json.load(f)
    assert report["process"]["arch"] == "aarch64"
    assert not [e for e in report["faultline"]["errors"] if "minidump" in e], report["faultline"]
    # Beside the report, under its name stem, named by it, and whole.
    assert report["minidump"] == os.path.basename(reports[0])[:-len(".json")] + ".dmp"
    dump = str(tmp_path / report["minidump"])
    assert os.path.getsize(dump) == report["faultline"]["minidump_bytes"]
    d = lldb_minidump.read(dump, program, search_paths=[arm64.SYSROOT + "/lib"])
    assert "(aarch64) was loaded" in d.out, d.out
    return report, d


def crashed_thread(report):
    return next(t for t in report["threads"] if t["tid"] == report["crashed_tid"])


def native_pcs(thread):
    return [int(f["pc"], 16) for f in thread["frames"] if f["kind"] == "native"]


def assert_registers_are_the_reports(report, d):
    """lldb's registers of the crashing thread equal the report's."""
    regs = {name: int(value, 16) for name, value in crashed_thread(report)["registers"].items()}
    lldb_names = {f"x{i}": f"x{i}" for i in range(29)}
    lldb_names.update({"x29": "fp", "x30": "lr", "sp": "sp", "pc": "pc", "pstate": "cpsr"})
    for ours, theirs in lldb_names.items():
        assert d.registers.get(theirs) == regs[ours], f"{ours}: {d.registers.get(theirs)}\n{d.out}"


def test_lldb_reads_every_thread(programs, lib, tmp_path):
    """A crash in a second thread while the main thread joins it and two
    more wait: lldb's threads, registers and backtraces are the report's."""
    report, d = crash_with_minidump(programs["nofp"], "thread", lib, tmp_path)
    out = d.out
    # The same threads, qemu's helper among them (not captured: no registers).
    assert sorted(t for t, _ in d.threads) == sorted(t["tid"] for t in report["threads"]), out
    assert d.threads[0][0] == report["crashed_tid"], out
    assert "stop reason = signal SIGSEGV" in out, out
    # The same modules at the same addresses (the program itself twice in
    # lldb's list: as the target and as the dump's module).
    for m in report["modules"]:
        assert int(m["base"], 16) in d.modules, f"{m['path']} at {m['base']}\n{out}"
    assert_registers_are_the_reports(report, d)
    # The crashing thread: frame 0 is the signal context's pc, the report's
    # frames are lldb's, in order, and lldb names the chain.
    crashed = crashed_thread(report)
    ours = native_pcs(crashed)
    theirs = [pc for pc, _ in d.threads[0][1]]
    assert theirs[0] == ours[0] == int(crashed["registers"]["pc"], 16), out
    assert is_subsequence(ours, theirs), f"report {[hex(p) for p in ours]}\n{out}"
    assert function_names(d.threads[0][1])[:4] == CHAIN + ["crasher"], out
    # The other threads start where the report says (their registers come
    # from their own signal contexts) and lldb walks them to the same frames.
    by_tid = {t["tid"]: t for t in report["threads"]}
    captured = 0
    for tid, frames in d.threads[1:]:
        t = by_tid[tid]
        if not t["captured"]:
            continue
        captured += 1
        pcs = native_pcs(t)
        assert frames and frames[0][0] == pcs[0], f"thread {tid}\n{out}"
        assert is_subsequence(pcs, [pc for pc, _ in frames]), f"thread {tid}: {[hex(p) for p in pcs]}\n{out}"
        names = function_names(frames)
        assert "waiter" in names or "main" in names, f"thread {tid}\n{out}"
    assert captured == 3, out


def test_fpsimd_state(programs, lib, tmp_path):
    """v0-v31, fpcr and fpsr come from the context's FP/SIMD record: the
    values the program set just before its fault."""
    report, d = crash_with_minidump(programs["nofp"], "fpsimd", lib, tmp_path)
    assert_registers_are_the_reports(report, d)
    assert d.registers.get("v0") == bytes([0x5a] * 16), d.out
    assert d.registers.get("v31") == bytes([0x00, 0xff] * 8), d.out
    assert d.registers.get("fpcr") == 0xc00000, d.out  # rounding towards zero
    assert d.registers.get("fpsr") == 0x10, d.out  # inexact
    names = function_names(d.threads[0][1])
    assert is_subsequence(CHAIN + ["main"], names), d.out


def test_pointer_authentication(programs, lib, tmp_path):
    """Built with -mbranch-protection=standard: the registers are the
    report's, and lldb's backtrace, as far as it gets before the first
    signed return address, is the report's."""
    report, d = crash_with_minidump(programs["pac"], "segv", lib, tmp_path)
    assert_registers_are_the_reports(report, d)
    ours = native_pcs(crashed_thread(report))
    theirs = [pc for pc, _ in d.threads[0][1]]
    assert len(theirs) >= 2 and theirs == ours[:len(theirs)], f"report {[hex(p) for p in ours]}\n{d.out}"


def test_upload_attaches_it(programs, lib, tmp_path):
    """The x86-64 faultline command sends the aarch64 minidump with its
    report: with the server unreachable, the envelope it keeps holds the
    .dmp, byte for byte, as the event's minidump."""
    cli = os.environ.get("FAULTLINE_CLI", "")
    if not os.path.exists(cli):
        pytest.skip("the faultline command is not built in this tree")
    report, _ = crash_with_minidump(programs["nofp"], "segv", lib, tmp_path)
    path = glob.glob(str(tmp_path / "faultline-*.json"))[0]
    # Port 9 of this machine: nothing listens, the connection is refused.
    r = subprocess.run([cli, "upload", "--dsn", "http://key@127.0.0.1:9/1", "--retries", "0",
                        "--timeout", "5", path], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "kept in" in r.stderr, r.stderr
    envelopes = glob.glob(str(tmp_path / ".faultline-spool" / "*.envelope"))
    assert len(envelopes) == 1, r.stderr
    with open(envelopes[0], "rb") as f:
        envelope = f.read()
    with open(tmp_path / report["minidump"], "rb") as f:
        dump = f.read()
    assert b'"attachment_type":"event.minidump"' in envelope
    assert dump in envelope and b'"arm64"' in envelope
