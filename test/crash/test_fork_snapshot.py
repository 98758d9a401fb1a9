"""fork while another thread of the parent loads and unloads libraries and
starts threads (each start refreshes the module snapshot under the loader's
lock). The children must never hang, and a child's crash is still reported."""
import signal

import fltest

FORKREFRESH = fltest.program("forkrefresh")
CRASHLIB = fltest.program("libcrashlib.so")


def test_children_forked_during_refreshes_start_threads_and_report_crashes():
    # Before: a child inherited the loader's lock (or the snapshot's) held by
    # the parent's refreshing thread and hung in its first pthread_create.
    r = fltest.run([FORKREFRESH, CRASHLIB, "300", "crash"], timeout=600)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.strip() == "ok", r.stdout
    assert len(r.reports) == 1, [rep["process"]["pid"] for rep in r.reports]
    rep = fltest.validate(r.report)
    assert rep["signal"]["name"] == "SIGSEGV"
    syms = fltest.native_symbols(fltest.crashed_thread(rep))
    i = syms.index("child_crash")
    assert syms[i + 1] == "main", syms
