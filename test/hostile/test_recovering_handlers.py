"""A program's own fault handler that recovers (a guard-page probe with
siglongjmp, a JVM-style handler that moves the context's pc, a handler that
fixes the page and retries), before or behind faultline: a recovered fault
gives no report and leaves faultline installed, the genuine crash after it
gets one, a handler that does not recover still gets its report, and the
exit status is the program's own. Real processes (test/programs/recovering.c,
CPython's faulthandler)."""
import os
import signal
import sys

import pytest

import fltest
from hostlib import LIB, SOURCE

RECOVERING = fltest.program("recovering")


def run(tmp_path, *args, **env):
    d = tmp_path / "reports"
    d.mkdir(exist_ok=True)
    env = {"FAULTLINE_DIR": str(d), **env}
    return fltest.run([RECOVERING, *args], preload=False, env=env, report_dir=str(d), timeout=120)


def fault_addresses(r):
    return sorted(int(rep["signal"]["fault_address"], 16) for rep in r.reports)


def survived_then_one_report(r, survived):
    """The recoverable faults all recovered, then the genuine crash reported."""
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert r.stdout == f"survived {survived}\n", r.stderr
    return one_report_of_the_genuine_crash(r)


def one_report_of_the_genuine_crash(r):
    assert len(r.reports) == 1, (len(r.reports), r.stderr)
    rep = fltest.validate(r.reports[0])
    assert rep["signal"]["name"] == "SIGSEGV" and rep["signal"]["fault_address"] == "0x10"
    assert "main" in fltest.native_symbols(fltest.crashed_thread(rep))
    assert r.stderr.count("report written to") == 1, r.stderr
    return rep


def test_guard_page_probes_before_faultline_give_no_report_and_faultline_stays(tmp_path):
    # 200 probes recovered with siglongjmp, one fixed with mprotect and
    # retried: before, the first probe was reported ("fatal signal") and
    # faultline stepped aside, so the genuine crash had no report.
    r = run(tmp_path, "before", "probe", "200")
    survived_then_one_report(r, 201)
    assert r.stderr.count("Fatal signal") + r.stderr.count("fatal signal") <= 1, r.stderr


def test_a_one_shot_handler_that_arms_itself_again_keeps_recovering(tmp_path):
    # SA_RESETHAND: faultline resets it as the kernel would; the handler's
    # sigaction() while faultline runs it is recorded, not applied, so
    # faultline stays in front even though the handler then siglongjmps.
    r = run(tmp_path, "before", "oneshot", "50")
    survived_then_one_report(r, 51)


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_sa_nodefer_handler_that_jumps_without_restoring_the_mask(tmp_path, where):
    # SA_NODEFER: the kernel never blocks SIGSEGV for it, so a jump to
    # sigsetjmp(env, 0) restores no mask. faultline must not leave SIGSEGV
    # blocked behind it either: the next probe would be forced to the
    # default action (no report, the process dies where it would go on).
    r = run(tmp_path, where, "nodefer", "50")
    survived_then_one_report(r, 51)


def test_eight_threads_probing_at_once_then_a_crash(tmp_path):
    # Each thread's call to the handler is its own (no crash is claimed
    # while it runs): none waits for another, none is reported.
    r = run(tmp_path, "before", "threads", "2000")
    rep = survived_then_one_report(r, 16000)
    assert rep["other_crashes"] == [], rep["other_crashes"]


def test_a_crash_while_eight_threads_keep_probing(tmp_path):
    # The report is made while the other threads go on faulting and
    # recovering (they answer the stack request from inside their handler).
    r = run(tmp_path, "before", "threads-crash", "500")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    rep = one_report_of_the_genuine_crash(r)
    assert rep["other_crashes"] == [], rep["other_crashes"]
    assert rep["threads_total"] == 9


def test_a_handler_that_moves_the_pc_recovers_thousands_of_faults_without_reports(tmp_path):
    r = run(tmp_path, "before", "rewrite", "5000")
    survived_then_one_report(r, 5000)


def test_a_collector_barrier_that_fixes_the_page_and_returns_gives_no_report(tmp_path):
    # The same store, every register equal, faults again after each
    # collection re-protects the page; the handler unprotects it and returns.
    # Before, the second fault was taken for the first one retried in vain
    # and reported.
    r = run(tmp_path, "before", "gc", "300")
    survived_then_one_report(r, 300)


def test_a_later_collector_barrier_gets_each_early_report_withdrawn(tmp_path):
    # Report first (asked for: a later handler may _exit); it then made the
    # access possible and returned unchanged: recovered, so the report is
    # withdrawn.
    r = run(tmp_path, "after", "gc", "3", FAULTLINE_CHAIN_ORDER="report-first")
    assert r.returncode == -signal.SIGSEGV and r.stdout == "survived 3\n", r.stderr
    assert r.stderr.count("report withdrawn: faultline-") == 3, r.stderr
    assert len(r.reports) == 1, r.stderr
    assert fltest.validate(r.reports[0])["signal"]["fault_address"] == "0x10"


def test_a_handler_that_returns_without_fixing_gets_the_fault_reported(tmp_path):
    # The store faults again with every register unchanged: not recovered.
    # One report, then the program's handler goes on (it _exits on its third call).
    r = run(tmp_path, "before", "unfixed")
    assert r.returncode == 42, r.stderr
    assert len(r.reports) == 1, r.stderr
    rep = fltest.validate(r.reports[0])
    assert rep["signal"]["name"] == "SIGSEGV" and rep["signal"]["fault_address"] != "0x10"
    assert r.stderr.index("report written to") < r.stderr.index("gave up")


def test_a_guard_region_the_handler_leaves_is_reported_though_its_mapping_allows_the_store(
        tmp_path):
    # MADV_GUARD_INSTALL faults inside a read-write mapping: a mapping that
    # allows the access after the handler is no sign it fixed anything here.
    r = run(tmp_path, "before", "guard-unfixed")
    if r.returncode == 77:
        pytest.skip("this kernel has no guard regions (MADV_GUARD_INSTALL, Linux 6.13)")
    assert r.returncode == 42, r.stderr
    assert len(r.reports) == 1, r.stderr
    assert r.stderr.index("report written to") < r.stderr.index("gave up")


def test_a_handler_that_aborts_reports_the_fault_and_dies_with_sigabrt(tmp_path):
    r = run(tmp_path, "before", "abort")
    assert r.returncode == -signal.SIGABRT, r.stderr
    one_report_of_the_genuine_crash(r)


def test_report_first_for_a_later_handler_kept_behind_faultline(tmp_path):
    # FAULTLINE_CHAIN_ORDER=report-first with a handler installed after
    # faultline: the report comes first (that handler may _exit), so each
    # recovered fault leaves a report; faultline stays installed and the
    # genuine crash after them gets one too.
    r = run(tmp_path, "after", "probe", "3", FAULTLINE_CHAIN_ORDER="report-first")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert r.stdout == "survived 4\n", r.stderr
    # Three siglongjmp probes keep their reports (faultline cannot tell in
    # time); the page fixed and retried is withdrawn.
    addrs = fault_addresses(r)
    assert len(addrs) == 4 and addrs[0] == 0x10 and len(set(addrs[1:])) == 1, addrs
    assert r.stderr.count("report withdrawn: faultline-") == 1, r.stderr
    for rep in r.reports:
        fltest.validate(rep)


def test_other_threads_run_on_after_a_later_handler_jumps_away_from_its_report(tmp_path):
    # Report first, then the program's handler siglongjmps out: it never
    # comes back to faultline, so the other threads cannot wait for its
    # verdict. They were frozen until faultline's park timeout (120 s).
    r = run(tmp_path, "after", "probe", "3", FAULTLINE_CHAIN_ORDER="report-first",
            RECOVERING_TICKER="1")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert r.stdout == "ticking\nsurvived 4\n", r.stdout + r.stderr


def test_a_later_handler_that_moves_the_pc_gets_each_early_report_withdrawn(tmp_path):
    # Report first (it may _exit), then it returns with the pc moved: the
    # fault was recovered, so the report is taken back and stderr says so.
    r = run(tmp_path, "after", "rewrite", "3", FAULTLINE_CHAIN_ORDER="report-first")
    assert r.returncode == -signal.SIGSEGV and r.stdout == "survived 3\n", r.stderr
    assert r.stderr.count("report withdrawn: faultline-") == 3, r.stderr
    assert r.stderr.count("report written to") == 4, r.stderr
    assert len(r.reports) == 1, r.stderr
    rep = fltest.validate(r.reports[0])
    assert rep["signal"]["fault_address"] == "0x10"
    withdrawn = [line.split("report withdrawn: ")[1] for line in r.stderr.splitlines()
                 if "report withdrawn: " in line]
    assert not any(os.path.exists(os.path.join(r.report_dir, n)) for n in withdrawn)


def test_later_handler_recovering_on_eight_threads_at_once_keeps_faultline(tmp_path):
    # Report first on each thread; a thread that faults while another owns
    # the crash waits for that report, and its fault is still the handler's
    # to recover. Before, that thread handed its fault on and faultline
    # stepped aside for good: the genuine crash then had no report.
    r = run(tmp_path, "after", "rewrite-threads", "40", FAULTLINE_CHAIN_ORDER="report-first")
    assert r.returncode == -signal.SIGSEGV and r.stdout == "survived 320\n", r.stderr
    assert len(r.reports) == 1, (len(r.reports), r.stderr[-3000:])
    rep = fltest.validate(r.reports[0])
    assert rep["signal"]["fault_address"] == "0x10"


def test_a_process_that_goes_on_after_a_withdrawn_report_keeps_its_interval_timer(tmp_path):
    # The watchdog's alarm() replaces the program's ITIMER_REAL; a process
    # that goes on after the report must get its timer back.
    r = run(tmp_path, "after", "rewrite-timer", "3", FAULTLINE_CHAIN_ORDER="report-first",
            FAULTLINE_WATCHDOG="10")
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert r.stdout == "timer ticking\nsurvived 3\n", r.stderr


@pytest.mark.parametrize("order", ["", "auto", "handler-first"])
def test_a_later_handler_runs_first_and_its_recoveries_give_no_report(tmp_path, order):
    # The default: faultline stays in front of a handler installed after it
    # and lets it decide first, as for one that was there before. Before,
    # each recovery left a report (or, without FAULTLINE_STAY_IN_FRONT,
    # the handler displaced faultline and the genuine crash had none).
    r = run(tmp_path, "after", "rewrite", "100", **({"FAULTLINE_CHAIN_ORDER": order} if order else {}))
    survived_then_one_report(r, 100)


def test_a_later_handler_that_probes_with_siglongjmp_gives_no_report(tmp_path):
    r = run(tmp_path, "after", "probe", "200")
    survived_then_one_report(r, 201)


def test_report_first_for_an_earlier_handler_reports_each_fault_and_stays_installed(tmp_path):
    r = run(tmp_path, "before", "probe", "3", FAULTLINE_CHAIN_ORDER="report-first")
    assert r.returncode == -signal.SIGSEGV and r.stdout == "survived 4\n", r.stderr
    addrs = fault_addresses(r)
    assert len(addrs) == 4 and addrs[0] == 0x10, addrs


def test_a_bad_chain_order_is_refused_with_a_warning(tmp_path):
    r = run(tmp_path, "before", "probe", "3", FAULTLINE_CHAIN_ORDER="sideways")
    assert "FAULTLINE_CHAIN_ORDER" in r.stderr and "sideways" in r.stderr
    one_report_of_the_genuine_crash(r)


# --- CPython's faulthandler enabled before a late-loaded faultline ---------------------------

JOB = """
import ctypes, faulthandler, sys
faulthandler.enable()
import faultline
faultline.enable(report_dir=sys.argv[1])
def kernel():
    return ctypes.c_int64.from_address(16).value
kernel()
"""


@pytest.mark.parametrize("order", ["auto", "report-first"])
def test_faulthandler_before_a_late_load_both_outputs_and_its_reraise(tmp_path, order):
    # faulthandler runs inside faultline's handler; its sigaction(SIG_DFL)
    # reaches the kernel (a late load interposes nothing) and its re-raise
    # stays pending until the report is written, then ends the process.
    d = tmp_path / "reports"
    d.mkdir()
    env = {"PYTHONPATH": os.path.join(SOURCE, "python"), "FAULTLINE_LIB": LIB,
           "FAULTLINE_CHAIN_ORDER": order}
    r = fltest.run([sys.executable, "-c", JOB, str(d)], preload=False, env=env,
                   report_dir=str(d), timeout=120)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    assert r.stderr.count("Current thread 0x") == 1, r.stderr
    assert len(r.reports) == 1, r.stderr
    rep = fltest.validate(r.reports[0])
    assert rep["signal"]["fault_address"] == "0x10"
    # The Python text once (faulthandler's): faultline adds only its native
    # frames and the report's path.
    assert r.stderr.count('line 7 in kernel') == 1, r.stderr
    faulthandler_at = r.stderr.index("Current thread 0x")
    report_at = r.stderr.index("report written to")
    if order == "report-first":
        assert report_at < faulthandler_at, r.stderr
    else:
        assert faulthandler_at < report_at, r.stderr
