"""Corrupt unwind tables must cost frames, never the report: a real process
whose call-frame information was damaged in memory crashes inside the damaged
function."""
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.environ["FAULTLINE_SOURCE"], "test", "lib"))
import fltest  # noqa: E402

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
