"""A handler that ran before faultline's and raised the fault again, on
aarch64 under qemu-user: the report describes the original fault, read from
the kernel's signal frame under the trampoline (its siginfo, checked against
the frame's fault_address, and its registers), and records the re-raise.
The oracle is the same program's fault without that handler: the same
signal, code, address, crash site and signature, the same exit status.

A handler without SA_SIGINFO leaves no siginfo in the frame; x86-64 rebuilds
the fault from the context's trap number and cr2, aarch64 would need the ESR
record qemu-user does not write, so there the report names the re-raise
(doc/aarch64.md)."""
import glob
import json
import os
import signal

import pytest

import arm64



@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return arm64.compile_variants(tmp_path_factory, "reraise.c", ["-ldl"])


def crash(program, mode, lib, tmp_path):
    d = tmp_path / mode
    d.mkdir()
    r = arm64.run([program, mode], cwd=d, preload=lib,
                  env={"FAULTLINE_DIR": str(d), "FAULTLINE_STDERR": "0"})
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert ("handler" in r.stderr) == (mode != "none"), r.stderr
    reports = glob.glob(str(d / "faultline-*.json"))
    assert len(reports) == 1, reports
    with open(reports[0]) as f:
        return json.load(f)


def crashed_thread(report):
    return next(t for t in report["threads"] if t["tid"] == report["crashed_tid"])


@pytest.mark.parametrize("variant", sorted(arm64.VARIANTS))
def test_the_original_fault_is_reported(variant, programs, lib, tmp_path):
    base = crash(programs[variant], "none", lib, tmp_path)
    rep = crash(programs[variant], "siginfo", lib, tmp_path)
    for k in ("number", "name", "code", "code_name", "fault_address"):
        assert rep["signal"][k] == base["signal"][k], (k, rep["signal"], base["signal"])
    assert base["signal"]["code_name"] == "SEGV_MAPERR" and base["signal"]["fault_address"] == "0x10"
    assert rep["diagnosis"]["category"] == base["diagnosis"]["category"]
    assert rep["diagnosis"]["signature"] == base["diagnosis"]["signature"]
    rr = rep["signal"]["reraised"]
    assert rr["name"] == "SIGSEGV" and rr["code_name"] == "SI_TKILL", rr
    assert rr["sender_pid"] == rep["process"]["pid"] and rr["original_from"] == "siginfo", rr
    # The crash site is the frame below the trampoline, and the registers are
    # the original context's: the faulting instruction, the fault address.
    frames = crashed_thread(rep)["frames"]
    site = frames[rr["trampoline_frame"] + 1]
    base_site = crashed_thread(base)["frames"][0]
    assert site.get("symbol") == base_site.get("symbol") == "fault_here", frames
    assert site["pc"] == base_site["pc"] and site.get("signal_frame") is True, site
    regs = crashed_thread(rep)["registers"]
    assert regs["pc"] == site["pc"] and regs["far"] == "0x10", regs


def test_without_siginfo_the_reraise_is_reported(programs, lib, tmp_path):
    """No siginfo in the frame and no ESR under qemu: the signal as raised,
    with the faulting frame still below the trampoline."""
    rep = crash(programs["nofp"], "plain", lib, tmp_path)
    assert rep["signal"]["code_name"] == "SI_TKILL" and not rep["signal"].get("reraised"), rep["signal"]
    assert "fault_here" in [f.get("symbol") for f in crashed_thread(rep)["frames"]]
