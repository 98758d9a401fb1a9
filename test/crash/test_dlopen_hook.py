"""The dlopen hook: each dlopen first brings the module snapshot up to date
(so a crash after libraries were loaded late finds it current), and dlopen
still sees its real caller (RUNPATH, $ORIGIN)."""
import os
import signal
import subprocess

import fltest

DLHOOK = fltest.program("dlhook")
CRASHLIB = fltest.program("libcrashlib.so")
OUTER = fltest.program("libdlo_outer.so")


def crash(*args):
    r = fltest.run([DLHOOK, "crash", CRASHLIB] + list(args))
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = fltest.validate(r.report)
    syms = fltest.native_symbols(fltest.crashed_thread(rep))
    assert syms[:3] == ["crashlib_inner", "crashlib_middle", "crashlib_crash"], syms
    assert any(m["path"] == os.path.realpath(CRASHLIB) or m["path"] == CRASHLIB
               for m in rep["modules"])
    return rep


def test_a_dlopen_after_a_load_brings_the_snapshot_up_to_date():
    assert crash("again")["faultline"]["modules_from"] == "snapshot"


def test_the_last_load_is_read_at_crash_time():
    # Nothing ran between the load and the crash: the snapshot is a prefix
    # of the link map, and only the modules of the last load are read from
    # it (crash() checks they are listed and unwound through).
    assert crash()["faultline"]["modules_from"] == "snapshot+link map"


def test_dlopen_keeps_the_callers_runpath():
    base = subprocess.run([DLHOOK, "runpath", OUTER], capture_output=True, text=True)
    assert base.stdout.strip() == "inner 42", base.stderr  # the setup works without faultline
    r = fltest.run([DLHOOK, "runpath", OUTER])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "inner 42"
