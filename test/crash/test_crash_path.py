"""Crash integration tests: real crashing processes under the preload, with
assertions on the report each one wrote, and the exit status compared with the
same program run without faultline."""
import json
import os
import re
import stat

import pytest

import fltest

CRASHER = fltest.program("crasher")

# mode -> (signal, code_name, innermost function of ours, category)
CASES = {
    "null-read": ("SIGSEGV", "SEGV_MAPERR", "null_read", "null-deref"),
    "ro-write": ("SIGSEGV", "SEGV_ACCERR", "ro_write", "memory-access"),
    "bad-fnptr": ("SIGSEGV", "SEGV_MAPERR", "bad_fnptr", "bad-jump"),
    "abort": ("SIGABRT", "SI_TKILL", "do_abort", "abort"),
    "div-zero": ("SIGFPE", "FPE_INTDIV", "div_zero", "divide-by-zero"),
    "ud2": ("SIGILL", "ILL_ILLOPN", "ud2", "illegal-instruction"),
    "sigbus": ("SIGBUS", "SI_TKILL", "do_sigbus", "bus-error"),
    "trap": ("SIGTRAP", "SI_KERNEL", "do_trap", "breakpoint"),
}


def baseline_status(args):
    return fltest.run([CRASHER] + args, preload=False).returncode


@pytest.mark.parametrize("mode", sorted(CASES))
def test_crash_report(mode):
    signame, code_name, func, category = CASES[mode]
    r = fltest.run([CRASHER, mode])
    # The process dies exactly as it would have without faultline.
    assert r.returncode == -fltest.signum(signame)
    assert r.returncode == baseline_status([mode])
    rep = fltest.validate(r.report)
    assert rep["schema"] == "faultline/1" and rep["kind"] == "crash"
    sig = rep["signal"]
    assert sig["name"] == signame and sig["number"] == fltest.signum(signame)
    assert sig["code_name"] == code_name
    assert sig["description"].startswith(code_name + ": ")
    assert rep["diagnosis"]["category"] == category
    assert len(rep["diagnosis"]["signature"]) == 16
    t = fltest.crashed_thread(rep)
    assert t["tid"] == rep["crashed_tid"] == rep["process"]["pid"]
    syms = fltest.native_symbols(t)
    # Our functions appear innermost-first and in call order, and the handler's
    # own frames never do.
    i = syms.index(func)
    assert syms[i + 1:i + 5] == ["level3", "level2", "level1", "main"]
    assert not any(s and ("crash_signal_handler" in s or "faultline" in s) for s in syms)
    assert t["frames"][0]["signal_frame"] is True
    assert "rip" in t["registers"] and t["registers"]["rip"] == t["frames"][0]["pc"]
    assert rep["process"]["argv"] == [CRASHER, mode]
    assert rep["process"]["executable"] == os.path.realpath(CRASHER)
    # Module table: the crasher and libc with build-ids.
    mods = {os.path.basename(m["path"]): m for m in rep["modules"]}
    assert len(mods["crasher"]["build_id"]) == 40
    assert mods["libc.so.6"]["build_id"]
    # stderr: the faulthandler-style summary, then where the report is.
    assert "faultline: fatal signal:" in r.stderr
    assert f"in crasher!{func}" in r.stderr or func in r.stderr
    assert "report written to" in r.stderr


def test_fault_address_and_frames_of_specific_crashes():
    rep = fltest.run([CRASHER, "null-read"]).report
    assert rep["signal"]["fault_address"] == "0x0"
    t = fltest.crashed_thread(rep)
    assert t["frames"][0]["symbol"] == "null_read"
    assert rep["diagnosis"]["summary"].startswith("SIGSEGV (address not mapped to object at 0x0) in crasher!null_read")

    # A call through a bad pointer: pc == fault address, and the caller is
    # still frame 1.
    rep = fltest.run([CRASHER, "bad-fnptr"]).report
    t = fltest.crashed_thread(rep)
    assert t["frames"][0]["pc"] == rep["signal"]["fault_address"] == "0xdead0000"
    assert t["frames"][0]["module"] is None
    assert t["frames"][1]["symbol"] == "bad_fnptr"

    # abort() was sent by the process itself: sender pid, no fault address,
    # and the summary names the caller, not libc's raise machinery.
    rep = fltest.run([CRASHER, "abort"]).report
    assert rep["signal"]["sender_pid"] == rep["process"]["pid"]
    assert rep["signal"]["fault_address"] is None
    assert "do_abort" in rep["diagnosis"]["summary"]


def test_stack_overflow_on_the_main_thread():
    r = fltest.run([CRASHER, "stack-overflow"])
    assert r.returncode == -fltest.signum("SIGSEGV") == baseline_status(["stack-overflow"])
    rep = fltest.validate(r.report)
    assert rep["diagnosis"]["category"] == "stack-overflow"
    t = fltest.crashed_thread(rep)
    assert t["frames_truncated"] is True
    assert t["frames_total"] > len(t["frames"]) == 256
    assert all(f["symbol"] == "recurse" for f in t["frames"][:100])


def test_crash_inside_a_dlopened_library():
    lib = fltest.program("libcrashlib.so")
    r = fltest.run([CRASHER, "dlopen", lib])
    assert r.returncode == baseline_status(["dlopen", lib])
    rep = fltest.validate(r.report)
    t = fltest.crashed_thread(rep)
    syms = fltest.native_symbols(t)
    assert syms[:4] == ["crashlib_inner", "crashlib_middle", "crashlib_crash", "dlopen_crash"]
    assert t["frames"][0]["module"] == os.path.realpath(lib) or t["frames"][0]["module"].endswith("libcrashlib.so")
    assert any(m["path"].endswith("libcrashlib.so") for m in rep["modules"])


def test_deep_cpp_stack_in_full_and_truncated():
    deep = fltest.program("deep")
    rep = fltest.validate(fltest.run([deep]).report)
    t = fltest.crashed_thread(rep)
    syms = fltest.native_symbols(t)
    assert syms[0] == "_ZN4deep5LevelILi0EE3runEi"
    assert syms[1] == "_ZN4deep5LevelILi1EE3runEi"
    assert syms[200] == "_ZN4deep5LevelILi200EE3runEi"
    assert syms[201] == "main"
    assert t["frames_truncated"] is False and t["frames_total"] == len(t["frames"])

    rep = fltest.validate(fltest.run([deep], env={"FAULTLINE_MAX_FRAMES": "64"}).report)
    t = fltest.crashed_thread(rep)
    assert len(t["frames"]) == 64
    assert t["frames_truncated"] is True and t["frames_total"] >= 203


def test_no_crash_no_report():
    r = fltest.run([CRASHER, "exit0"])
    assert r.returncode == 0 and r.reports == []
    assert r.stderr == ""


def test_report_file_is_private_and_complete():
    r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_MINIDUMP": "1"})
    names = sorted(fltest.listdir(r.report_dir))
    # The report and its minidump, under one name stem; nothing else (no
    # temporary file left).
    assert len(names) == 2 and names[1] == names[0][:-len(".dmp")] + ".json", names
    assert r.report["minidump"] == names[0]
    for name in names:
        st = os.stat(os.path.join(r.report_dir, name))
        assert stat.S_IMODE(st.st_mode) == 0o600
    pid = r.report["process"]["pid"]
    # faultline-<time>-<host>-<pid>-<tid>-<16 hex>.json
    assert re.fullmatch(rf"faultline-\d{{8}}T\d{{6}}-[A-Za-z0-9._]+-{pid}-{pid}-[0-9a-f]{{1,16}}\.json",
                        names[1]), names[1]
    r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_MINIDUMP": "0"})
    assert len(fltest.listdir(r.report_dir)) == 1 and r.report["minidump"] is None


def test_two_crashes_never_collide():
    d = fltest.run([CRASHER, "null-read"]).report_dir
    fltest.run([CRASHER, "null-read"], report_dir=d)
    fltest.run([CRASHER, "abort"], report_dir=d)
    assert len([n for n in os.listdir(d) if n.endswith(".json")]) == 3


def test_unwritable_directory_puts_the_report_on_stderr():
    r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_DIR": "/nonexistent/faultline"})
    assert r.returncode == baseline_status(["null-read"])
    assert "report directory /nonexistent/faultline cannot be opened" in r.stderr
    assert "could not write the report" in r.stderr
    body = r.stderr.split("--- faultline report begin ---\n", 1)[1].split("--- faultline report end ---", 1)[0]
    rep = fltest.validate(json.loads(body))
    assert fltest.crashed_thread(rep)["frames"][0]["symbol"] == "null_read"


def test_read_only_directory_after_start(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    os.chmod(d, 0o500)
    try:
        # As root the mode alone does not stop writes; a read-only bind is
        # not available here, so only assert when the mode really applies.
        r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_DIR": str(d)})
        assert r.returncode == baseline_status(["null-read"])
        if os.geteuid() != 0:
            assert "report follows on stderr" in r.stderr
        else:
            assert len([n for n in os.listdir(d) if n.endswith(".json")]) == 1
    finally:
        os.chmod(d, 0o700)


def test_bad_settings_warn_once_and_use_defaults():
    r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_MAX_FRAMES": "lots", "FAULTLINE_SIGNALS": "SEGV,NOPE"})
    assert r.stderr.count("ignoring FAULTLINE_MAX_FRAMES=lots") == 1
    assert r.stderr.count("ignoring FAULTLINE_SIGNALS=SEGV,NOPE") == 1
    rep = fltest.validate(r.report)
    assert rep["signal"]["name"] == "SIGSEGV"


def test_settings_are_honoured():
    # Only SIGABRT handled: a SIGSEGV passes untouched.
    r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_SIGNALS": "ABRT"})
    assert r.reports == [] and r.returncode == baseline_status(["null-read"])
    r = fltest.run([CRASHER, "abort"], env={"FAULTLINE_SIGNALS": "ABRT", "FAULTLINE_STDERR": "0"})
    assert len(r.reports) == 1 and "faultline" not in r.stderr
    r = fltest.run([CRASHER, "null-read"], env={"FAULTLINE_DISABLE": "1"})
    assert r.reports == []


def test_core_dump_is_still_produced(tmp_path):
    if open("/proc/sys/kernel/core_pattern").read().strip() != "core":
        pytest.skip("core_pattern is not 'core'")
    import resource
    import subprocess

    def run_with_core(preload):
        d = tmp_path / ("with" if preload else "without")
        d.mkdir()
        env = dict(os.environ, FAULTLINE_DIR=str(d))
        if preload:
            env["LD_PRELOAD"] = fltest.LIB
        p = subprocess.run([CRASHER, "null-read"], cwd=d, env=env, capture_output=True,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (-1, -1)))
        return p.returncode, (d / "core").exists()

    assert run_with_core(False) == run_with_core(True) == (-11, True)
