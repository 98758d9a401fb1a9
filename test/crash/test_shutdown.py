"""Shutdown reports: under torchrun (TORCHELASTIC_RUN_ID set) or with
FAULTLINE_SHUTDOWN_REPORTS=1, a SIGTERM leaves a report of kind "shutdown"
with every thread's stacks, and then takes its normal course: the
program's own handler, else the default action, else nothing when the
program ignores it. SIGINT is left to Python's KeyboardInterrupt. The oracle is the same program without faultline: the
exit status must be the same."""
import json
import os
import signal
import subprocess
import sys
import tempfile

import pytest

import fltest

# Waits where a collective would: the report's Python frames must show it.
PROGRAM = r"""
import signal, sys, threading, time
mode = sys.argv[1]
if mode == "handler":
    def on_term(signo, frame):
        print("handled", flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, on_term)
elif mode == "interrupt":
    def all_reduce_stand_in():
        try:
            print("ready", flush=True)
            time.sleep(3600)
        except KeyboardInterrupt:
            print("cleanup", flush=True)
            sys.exit(3)
    all_reduce_stand_in()
elif mode == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
threading.Thread(target=lambda: time.sleep(3600), daemon=True, name="worker").start()
def all_reduce_stand_in():
    print("ready", flush=True)
    if mode == "ignore":
        sys.stdin.readline()  # the test's go-ahead, after its SIGTERM
        sys.exit(0)
    while True:
        time.sleep(3600)
def sync_grads():
    all_reduce_stand_in()
sync_grads()
"""

TORCHRUN = {"TORCHELASTIC_RUN_ID": "stop-test", "RANK": "1", "WORLD_SIZE": "2",
            "LOCAL_RANK": "1", "GROUP_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "0"}
# Shutdown reports are off unless asked for, under torchrun too.
REPORTS = dict(TORCHRUN, FAULTLINE_SHUTDOWN_REPORTS="1")


def run_and_stop(mode, signo, env, preload=True):
    """Starts the program, sends SIGNO once it is ready; returns (status, reports, stdout)."""
    report_dir = tempfile.mkdtemp(prefix="faultline-shutdown-")
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("FAULTLINE_", "TORCHELASTIC_")) and k != "LD_PRELOAD"}
    e.update(env)
    if preload:
        e["LD_PRELOAD"] = fltest.LIB
        e["FAULTLINE_DIR"] = report_dir
    p = subprocess.Popen([sys.executable, "-c", PROGRAM, mode], env=e, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signo)
    if mode == "ignore":
        p.stdin.write("go\n")
        p.stdin.flush()
    out, err = p.communicate(timeout=60)
    reports = []
    for name in sorted(os.listdir(report_dir)):
        if name.startswith("faultline-") and name.endswith(".json"):
            with open(os.path.join(report_dir, name)) as f:
                reports.append(json.load(f))
    return p.returncode, reports, out, err


def python_functions(report):
    return [f["function"] for t in report["threads"] for f in t.get("frames", [])
            if f.get("kind") == "python"]


# The program's SIGTERM handler, installed after faultline: by default it
# replaces faultline's (no report); FAULTLINE_STAY_IN_FRONT=1 keeps faultline
# in front, and the handler runs after the report.
@pytest.mark.parametrize("mode,env", [("default", {}), ("handler", {"FAULTLINE_STAY_IN_FRONT": "1"})])
def test_shutdown_report_then_the_signals_own_course(mode, env):
    signo = signal.SIGTERM
    baseline, none, base_out, _ = run_and_stop(mode, signo, TORCHRUN, preload=False)
    status, reports, out, err = run_and_stop(mode, signo, dict(REPORTS, **env))
    assert status == baseline, err
    assert out == base_out  # the program's own handler ran (or did not) as without faultline
    (rep,) = reports
    fltest.validate(rep)
    assert rep["kind"] == "shutdown"
    assert rep["signal"]["name"] == signal.Signals(signo).name
    assert rep["diagnosis"]["category"] == "shutdown"
    assert rep["job"]["run_id"] == "stop-test" and rep["job"]["rank"] == 1
    fns = python_functions(rep)
    assert "all_reduce_stand_in" in fns and "sync_grads" in fns
    if mode == "default":
        assert len(rep["threads"]) >= 2  # every thread, the sleeping worker too
    else:
        # The program's handler takes over and the process may go on: no
        # other thread is stopped (its system calls would see EINTR); their
        # Python stacks are still there.
        others = [t for t in rep["threads"] if not t.get("crashed")]
        assert others and not any(t.get("captured") for t in others), others
        assert all("not interrupted" in t.get("note", "") for t in others), others
        assert any(f.get("kind") == "python" for t in others for f in t.get("frames", []))
    # A stopped rank is no crash: no fatal-error text for log scrapers to
    # count, one line that says what the report is.
    assert "Fatal Python error" not in err and "Current thread" not in err, err
    assert "faultline: " in err and "shutdown" in err, err


def test_own_handler_installed_after_faultline_runs_as_before():
    baseline, _, base_out, _ = run_and_stop("handler", signal.SIGTERM, TORCHRUN, preload=False)
    status, reports, out, err = run_and_stop("handler", signal.SIGTERM, REPORTS)
    assert (status, out) == (baseline, base_out) == (7, "handled\n"), err
    assert reports == []


def test_sigint_is_still_keyboard_interrupt():
    baseline, _, base_out, _ = run_and_stop("interrupt", signal.SIGINT, TORCHRUN, preload=False)
    status, reports, out, err = run_and_stop("interrupt", signal.SIGINT, REPORTS)
    assert (status, out) == (baseline, base_out) == (3, "cleanup\n"), err
    assert reports == []


def test_ignored_sigterm_stays_ignored_without_a_report():
    baseline, _, _, _ = run_and_stop("ignore", signal.SIGTERM, TORCHRUN, preload=False)
    status, reports, _, err = run_and_stop("ignore", signal.SIGTERM, REPORTS)
    assert baseline == 0 and status == 0, err
    assert reports == []


def test_nothing_changes_by_default_under_torchrun_or_not():
    for env in ({}, TORCHRUN):
        status, reports, _, err = run_and_stop("default", signal.SIGTERM, env)
        assert status == -signal.SIGTERM and reports == [], err


PROBE = r"""
import signal, sys
old = signal.signal(signal.SIGTERM, lambda s, f: None)
signal.signal(signal.SIGTERM, old)  # the save-and-restore libraries do
print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
"""


def test_python_sees_sigterm_as_without_faultline_by_default():
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update(TORCHRUN, LD_PRELOAD=fltest.LIB)
    p = subprocess.run([sys.executable, "-c", PROBE], env=e, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout == "True\n", p.stdout + p.stderr


def test_an_inherited_ignore_of_sigterm_is_kept():
    # A launcher (nohup, a service manager) made SIGTERM ignored: it stays
    # ignored in the process and its children, and nothing is reported.
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.update(REPORTS, LD_PRELOAD=fltest.LIB)
    script = "import os, sys; print(open('/proc/self/status').read().split('SigIgn:')[1].split()[0])"
    p = subprocess.run([sys.executable, "-c", script], env=e, capture_output=True, text=True,
                       timeout=60,
                       preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    assert p.returncode == 0, p.stderr
    assert int(p.stdout, 16) & (1 << (signal.SIGTERM - 1)), p.stdout


def test_the_setting_turns_it_on_and_off():
    status, reports, _, err = run_and_stop("default", signal.SIGTERM,
                                           {"FAULTLINE_SHUTDOWN_REPORTS": "1"})
    assert status == -signal.SIGTERM, err
    (rep,) = reports
    assert rep["kind"] == "shutdown" and "job" not in fltest.validate(rep)
    status, reports, _, err = run_and_stop("default", signal.SIGTERM,
                                           dict(TORCHRUN, FAULTLINE_SHUTDOWN_REPORTS="0"))
    assert status == -signal.SIGTERM and reports == [], err
