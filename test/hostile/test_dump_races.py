"""Races around the dump signal's helper dump (a reviewer's cases): the
helper's environment is not read from `environ` in the handler (another
thread's setenv() frees it meanwhile: the job died of SIGSEGV); a dump
signal on the thread whose own faultline_dump_now() helper runs is answered
by that dump (it asked every thread by signal: EINTR in a poll());
a crash during a helper dump ends the helper first, so nothing is
reparented to a child subreaper program (SIGCHLD, a child it never made)."""
import json
import os
import subprocess

import pytest

import fltest
from test_dump_now import _under_seccomp

pytestmark = pytest.mark.skipif(_under_seccomp(),
                                reason="the tests run under a seccomp filter: dumps go by signal")

DUMPRACES = fltest.program("dumpraces")


def run(tmp_path, *args):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DIR": str(tmp_path), "FAULTLINE_DUMP": "1",
              "FAULTLINE_STDERR": "0"})
    r = subprocess.run([DUMPRACES, *map(str, args)], env=e, capture_output=True, text=True,
                       timeout=240)
    return r.returncode, r.stdout.split(), list(tmp_path.glob("faultline-*.json"))


def test_the_environment_rewritten_during_dumps_does_not_kill_the_job(tmp_path):
    rc, out, reports = run(tmp_path, "envrace", 150)
    assert (rc, out) == (0, ["survived", "150", "dumps"]), rc
    assert reports


@pytest.mark.parametrize("delay_ms", [1, 5, 10])
def test_a_dump_signal_during_the_same_threads_dump_now_interrupts_no_thread(tmp_path, delay_ms):
    rc, out, reports = run(tmp_path, "nested", delay_ms)
    assert (rc, out) == (0, ["dump_now", "0", "eintr", "0"])
    for path in reports:
        assert fltest.validate(json.load(open(path)))["capture"] == "ptrace"


@pytest.mark.parametrize("delay_ms", [2, 5, 10])
def test_a_crash_during_a_helper_dump_leaves_no_child_to_a_subreaper(tmp_path, delay_ms):
    rc, out, _ = run(tmp_path, "reaper", delay_ms)
    assert (rc, out) == (0, ["sigchld", "0", "waitpid", "-1"])
