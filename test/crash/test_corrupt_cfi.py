"""Damaged or missing unwind tables must cost frames, never the report, and
never add a wrong one: real processes crash inside such functions."""
import signal

import pytest

import fltest

BADCFI = fltest.program("badcfi")


def test_call_frame_program_whose_length_wraps_does_not_hang_the_unwinder():
    # The expression length wraps the program back onto itself. Without a
    # bound the unwind phase loops until the watchdog abandons it.
    r = fltest.run([BADCFI], env={"FAULTLINE_UNWINDER": "cfi", "FAULTLINE_WATCHDOG": "30"},
                   timeout=120)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    rep = fltest.validate(r.report)
    errors = rep["faultline"]["errors"]
    assert not any("watchdog" in e or e.startswith("unwind: fault") for e in errors), errors
    syms = fltest.native_symbols(fltest.crashed_thread(rep))
    i = syms.index("bad_cfi_leaf")
    assert syms[i + 1:i + 3] == ["trigger", "main"], syms


@pytest.mark.parametrize("unwinder", ["cfi", "libunwind"])
def test_function_without_tables_past_its_prologue_adds_no_bogus_frame(unwinder):
    # The first frame has no unwind information and has pushed registers:
    # the stack top is a saved register. Taking it for the return address
    # put a bogus frame (a stack address) between it and its caller.
    r = fltest.run([fltest.program("fphost")], env={"FAULTLINE_UNWINDER": unwinder})
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    rep = fltest.validate(r.report)
    syms = fltest.native_symbols(fltest.crashed_thread(rep))
    assert syms[:3] == ["fp_only_read", "outer_call", "main"], syms
