"""A handler that ran before faultline's and raised the fault again (CPython's
faulthandler enabled after start, a program's own handler that puts back the
previous action and re-raises): the report describes the original fault, read
from the kernel's signal frame under the trampoline, and records the re-raise.
The oracle is the same crash without that handler: same signal, code,
category, crash site and signature. Real crashing processes."""
import glob
import json
import os
import signal
import struct
import subprocess
import sys
import time

import pytest

import fltest

JOB = """
import ctypes, faulthandler, os
if os.environ.get("WITH_FAULTHANDLER") == "1":
    faulthandler.enable()
def f():
    ctypes.string_at(0x10)
f()
"""

RERAISER = fltest.program("reraiser")


def interpreters():
    found = ["/usr/bin/python3"]
    root = os.path.expanduser("~/.pyenv")
    for minor in ("3.11", "3.12"):
        found += sorted(glob.glob(os.path.join(root, "versions", minor + ".*", "bin", "python3")))[:1]
    return [p for p in found if os.path.exists(p)]


def run_program(tmp_path, *args, **env):
    """The program links faultline; reports go to a directory of their own."""
    d = tmp_path / ("reports-" + "-".join(args))
    d.mkdir()
    return fltest.run([RERAISER, *args], preload=False, env={"FAULTLINE_DIR": str(d), **env},
                      report_dir=str(d))


def native(thread):
    return [f for f in thread["frames"] if f["kind"] == "native"]


def site(rep):
    """The crash site: the frame below the trampoline of a re-raise, else the
    first frame."""
    frames = native(fltest.crashed_thread(rep))
    rr = rep["signal"].get("reraised")
    return frames[rr["trampoline_frame"] + 1] if rr and "trampoline_frame" in rr else frames[0]


def same_fault(rep, base):
    for k in ("number", "name", "code", "code_name", "description"):
        assert rep["signal"][k] == base["signal"][k], (k, rep["signal"], base["signal"])
    assert "sender_pid" not in rep["signal"], rep["signal"]
    assert rep["diagnosis"]["category"] == base["diagnosis"]["category"]
    assert rep["diagnosis"]["signature"] == base["diagnosis"]["signature"]
    s, b = site(rep), site(base)
    assert (s.get("symbol"), s["module"], s["module_offset"]) == (b.get("symbol"), b["module"], b["module_offset"])
    # libunwind flags the frame below a trampoline's caller instead (its
    # unw_is_signal_frame answers for the frame stepped to).
    if fltest.crashed_thread(rep)["unwinder"].startswith("cfi"):
        assert s.get("signal_frame") is True
    # The registers are the original context's: the faulting instruction.
    assert fltest.crashed_thread(rep)["registers"]["rip"] == s["pc"]


def reraised_by_self(rep, delivered):
    rr = rep["signal"]["reraised"]
    assert rr["name"] == delivered and rr["code_name"] == "SI_TKILL", rr
    assert rr["sender_pid"] == rep["process"]["pid"]
    frames = native(fltest.crashed_thread(rep))
    # Above the trampoline: the handler's raise.
    assert any(f.get("symbol") in ("raise", "gsignal", "__pthread_kill_implementation")
               for f in frames[:rr["trampoline_frame"]]), frames[:4]
    assert "tkill" not in rep["diagnosis"]["summary"], rep["diagnosis"]["summary"]
    return rr


UNWINDERS = ["cfi", "libunwind"]


@pytest.mark.parametrize("unwinder", UNWINDERS)
@pytest.mark.parametrize("python", interpreters())
def test_python_faulthandler_reraise_reports_the_original_fault(python, unwinder, tmp_path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    # faulthandler displaces faultline (FAULTLINE_STAY_IN_FRONT=0) and
    # re-raises into it: the re-raise is read back to the original fault.
    r = fltest.run([python, str(job)], env={"WITH_FAULTHANDLER": "1", "FAULTLINE_UNWINDER": unwinder,
                                            "FAULTLINE_STAY_IN_FRONT": "0"})
    base = fltest.run([python, str(job)], env={"WITH_FAULTHANDLER": "0", "FAULTLINE_UNWINDER": unwinder})
    assert fltest.crashed_thread(r.report)["unwinder"].startswith(unwinder)
    assert r.returncode == base.returncode == -signal.SIGSEGV, r.stderr
    assert "re-raised" not in base.stderr
    rep, base = fltest.validate(r.report), fltest.validate(base.report)
    assert rep["signal"]["fault_address"] == "0x10" and rep["signal"]["code_name"] == "SEGV_MAPERR"
    same_fault(rep, base)
    rr = reraised_by_self(rep, "SIGSEGV")
    assert "(re-raised by a handler as SIGSEGV; the original fault is shown)" in r.stderr
    # faulthandler's handler is no SA_SIGINFO one: the kernel's frame has no
    # siginfo, the fault comes from the context's trap number and cr2.
    assert rr["original_from"] == "context"
    assert fltest.crashed_thread(rep)["registers"]["cr2"] == "0x10"
    s = site(rep)
    assert s.get("symbol", "").startswith(("__strlen", "strlen", "string_at")), s
    assert rep["diagnosis"]["category"] == "null-deref"
    assert "address not mapped to object at 0x10" in rep["diagnosis"]["summary"]
    # The Python frames are still merged in.
    t = fltest.crashed_thread(rep)
    assert t.get("interleaved") is True
    py = [f["function"] for f in t["frames"] if f["kind"] == "python"]
    assert py[:3] == ["string_at", "f", "<module>"], py
    # faulthandler still wrote its traceback.
    assert "Fatal Python error: Segmentation fault" in r.stderr
    assert 'line 6 in f' in r.stderr, r.stderr
    # show and markdown say so.
    path = glob.glob(os.path.join(r.report_dir, "faultline-*.json"))[0]
    shown = fltest.cli("show", "--color", "never", path)
    assert shown.returncode == 0 and "re-raised by a handler" not in shown.stdout.splitlines()[0]
    assert "Re-raised:" in shown.stdout and "by a handler, as SIGSEGV" in shown.stdout, shown.stdout
    md = fltest.cli("markdown", path)
    assert md.returncode == 0 and "re-raised by a handler" in md.stdout, md.stdout


@pytest.mark.parametrize("mode", ["restore", "returned"])
@pytest.mark.parametrize("unwinder", UNWINDERS)
@pytest.mark.parametrize("fault,sig,code", [("bus", "SIGBUS", "BUS_ADRERR"), ("fpe", "SIGFPE", "FPE_INTDIV"),
                                            ("segv", "SIGSEGV", "SEGV_MAPERR")])
def test_a_handler_that_restores_faultlines_and_reraises(mode, fault, sig, code, unwinder, tmp_path):
    # restore: the program's handler took the signal over after faultline;
    # it puts back the action it replaced (faultline's) and raises again,
    # with SA_NODEFER, so faultline runs on top of the handler's frames.
    # returned: installed past faultline's interposer (libc's own sigaction),
    # it puts faultline's action back, sends the signal to its thread again
    # and returns, as UCX's error handler does (torch builds that use UCX
    # load it): the re-raise comes at the faulting instruction, with no
    # trampoline on the stack. That report said "SIGSEGV sent by tkill" with
    # no address; it describes the fault now, rebuilt from the context.
    # FAULTLINE_STAY_IN_FRONT=0: the handler takes the signal over (by
    # default faultline stays in front and calls it, no re-raise to read back).
    r = run_program(tmp_path, mode, fault, FAULTLINE_UNWINDER=unwinder, FAULTLINE_STAY_IN_FRONT="0")
    base = run_program(tmp_path, "none", fault, FAULTLINE_UNWINDER=unwinder)
    assert r.returncode == base.returncode == -fltest.signum(sig), r.stderr
    assert "handler" in r.stderr
    rep, base = fltest.validate(r.reports[0]), fltest.validate(base.report)
    assert rep["signal"]["code_name"] == code
    same_fault(rep, base)
    if mode == "restore":
        rr = reraised_by_self(rep, sig)
        assert rr["original_from"] == "siginfo"
    else:
        rr = rep["signal"]["reraised"]
        assert rr["name"] == sig and rr["code_name"] == "SI_TKILL", rr
        assert rr["sender_pid"] == rep["process"]["pid"]
        assert "trampoline_frame" not in rr and rr["original_from"] == "context", rr
        assert "(re-raised by a handler as " + sig in r.stderr
    s = site(rep)
    assert s["symbol"] == fault + "_fault", s
    if fault == "fpe":
        assert rep["signal"]["fault_address"] == s["pc"]
    if fault == "segv":
        assert rep["signal"]["fault_address"] == "0x10"
    if fault == "bus":  # the first byte past the file's end: a page of its own
        assert int(rep["signal"]["fault_address"], 16) % 4096 == 0


def test_a_raise_after_a_recovered_fault_is_not_taken_for_it(tmp_path):
    # The thread's trap number and cr2 still describe the first fault (the
    # program's handler jumped out of it); the raise() later lands right
    # after a system call and is reported as what it is.
    r = run_program(tmp_path, "stale", "segv")
    assert r.returncode == -signal.SIGSEGV and "recovered" in r.stderr, r.stderr
    rep = fltest.validate(r.report)
    assert rep["signal"]["code_name"] == "SI_TKILL" and rep["signal"]["fault_address"] is None
    assert "reraised" not in rep["signal"]


@pytest.mark.parametrize("fault,sig", [("segv", "SIGSEGV"), ("fpe", "SIGFPE")])
def test_a_signal_from_another_thread_is_not_taken_for_a_fault(fault, sig, tmp_path):
    # The thread keeps its last fault's trap number and cr2 (one it jumped
    # out of; for SIGFPE, trap number 0 is the divide error's). A
    # pthread_kill from another thread lands at any instruction of a loop
    # of loads or of divisions by 7: the instruction there made no such
    # fault, and the signal is reported as sent.
    r = run_program(tmp_path, "foreign", fault)
    assert r.returncode == -fltest.signum(sig) and "recovered" in r.stderr, r.stderr
    rep = fltest.validate(r.report)
    assert rep["signal"]["name"] == sig and rep["signal"]["code_name"] == "SI_TKILL", rep["signal"]
    assert rep["signal"]["fault_address"] is None and "reraised" not in rep["signal"]


@pytest.mark.parametrize("order", ["handler-first", "report-first"])
def test_a_handler_that_resets_to_the_default_and_reraises(order, tmp_path):
    # Behind faultline (kept there by FAULTLINE_STAY_IN_FRONT): faultline
    # calls it as a function and reports the original fault; no re-raise.
    env = {"FAULTLINE_STAY_IN_FRONT": "1", "FAULTLINE_CHAIN_ORDER": order}
    for fault, sig in (("bus", "SIGBUS"), ("fpe", "SIGFPE")):
        r = run_program(tmp_path, "dfl", fault, **env)
        assert r.returncode == -fltest.signum(sig), r.stderr
        rep = fltest.validate(r.report)
        assert rep["signal"]["name"] == sig and rep["signal"]["code"] > 0
        assert "reraised" not in rep["signal"]
        assert site(rep)["symbol"] == fault + "_fault"


def test_a_plain_raise_is_unchanged(tmp_path):
    r = run_program(tmp_path, "raise", "segv")
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    assert rep["signal"]["code_name"] == "SI_TKILL" and rep["signal"]["fault_address"] is None
    assert rep["signal"]["sender_pid"] == rep["process"]["pid"]
    assert "reraised" not in rep["signal"]
    assert "sent by tkill" in rep["diagnosis"]["summary"]


@pytest.mark.parametrize("with_faulthandler", ["0", "1"])
def test_kill_from_another_process_is_unchanged(with_faulthandler, tmp_path):
    # With faulthandler, the signal reaches faultline as its re-raise over a
    # trampoline, but the original was a kill: no fault to recover.
    d = tmp_path / "reports"
    d.mkdir()
    env = dict(os.environ, LD_PRELOAD=fltest.LIB, FAULTLINE_DIR=str(d), WITH_FAULTHANDLER=with_faulthandler)
    code = ("import faulthandler, os, sys, time\n"
            "if os.environ['WITH_FAULTHANDLER'] == '1': faulthandler.enable()\n"
            "print('ready', flush=True)\n"
            "time.sleep(120)\n")
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    time.sleep(0.2)  # into the sleep (not an assertion on time)
    os.kill(p.pid, signal.SIGSEGV)
    _, err = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGSEGV, err
    paths = glob.glob(os.path.join(str(d), "faultline-*.json"))
    assert len(paths) == 1, err
    rep = fltest.validate(json.load(open(paths[0])))
    assert "reraised" not in rep["signal"], rep["signal"]
    assert rep["signal"]["name"] == "SIGSEGV" and rep["signal"]["fault_address"] is None
    assert rep["signal"]["code"] <= 0


def minidump_exception(path):
    """The exception stream of a minidump, read here from the public format
    (not by faultline's code): (signal number, si_code, fault address,
    the context's rip)."""
    data = open(path, "rb").read()
    assert data[:4] == b"MDMP"
    nstreams, dir_rva = struct.unpack_from("<II", data, 8)
    for i in range(nstreams):
        kind, size, rva = struct.unpack_from("<III", data, dir_rva + 12 * i)
        if kind == 6:  # MD_EXCEPTION_STREAM
            code, flags, _record, address = struct.unpack_from("<IIQQ", data, rva + 8)
            ctx_size, ctx_rva = struct.unpack_from("<II", data, rva + 8 + 152)
            # MDRawContextAMD64: rip at offset 0xf8.
            rip = struct.unpack_from("<Q", data, ctx_rva + 0xF8)[0]
            return code, flags, address, rip
    raise AssertionError("no exception stream")


@pytest.mark.parametrize("mode", ["restore", "returned"])
def test_the_minidump_describes_the_fault_the_report_describes(mode, tmp_path):
    # The re-raise is read back to the original fault before the minidump
    # is written: both files describe the same fault, not one the re-raise.
    r = run_program(tmp_path, mode, "segv", FAULTLINE_MINIDUMP="1", FAULTLINE_STAY_IN_FRONT="0")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = fltest.validate(r.reports[0])
    assert rep["signal"]["reraised"]["name"] == "SIGSEGV"
    dump = os.path.join(r.report_dir, rep["minidump"])
    code, si_code, address, rip = minidump_exception(dump)
    assert code == rep["signal"]["number"] == signal.SIGSEGV
    assert si_code == rep["signal"]["code"] == 1  # SEGV_MAPERR, not the re-raise's SI_TKILL
    assert address == int(rep["signal"]["fault_address"], 16) == 0x10
    assert rip == int(site(rep)["pc"], 16)
