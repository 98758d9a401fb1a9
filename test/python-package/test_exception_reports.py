"""Uncaught Python exceptions leave a report of kind "exception" wherever the
package is active (enable(), or the start-up hook in a preloaded job): the
exception's type, message, traceback and text, every thread's stacks. The
previous sys.excepthook / threading.excepthook still run and print as
before, and the exit status is the same as without faultline (the oracle:
the same program run without the package). KeyboardInterrupt and SystemExit
leave none."""
import json
import os
import re
import subprocess

import pytest

import fltest
from pkgtest import PYTHONPATH, SYSTEM_PYTHON, run_py

PROGRAM = """
import sys, threading, time
MODE = sys.argv[1]
BARE = sys.argv[2:] == ["bare"]  # the oracle: without faultline
if not BARE:
    import faultline
    faultline.enable()
if MODE == "custom" and not BARE:
    previous = sys.excepthook
    def custom(t, e, tb):
        print("custom hook saw", t.__name__, flush=True)
        previous(t, e, tb)
    sys.excepthook = custom
    import faultline
    faultline.enable()  # again: chains in front of the custom hook
ready = threading.Event()
def helper_wait():
    ready.set()
    time.sleep(60)
threading.Thread(target=helper_wait, daemon=True, name="helper").start()
ready.wait()
def poison_step(x):
    if MODE == "interrupt":
        raise KeyboardInterrupt
    if MODE == "exit":
        raise SystemExit(3)
    if MODE == "thread":
        def in_thread():
            raise ValueError("thread failed")
        t = threading.Thread(target=in_thread, name="worker")
        t.start()
        t.join()
        print("main goes on", flush=True)
        return
    raise RuntimeError(f"Timed out waiting {x}ms for recv operation to complete")
def train():
    poison_step(1800)
train()
"""

TRACEBACK_FRAME = re.compile(r'^  File "(.*)", line (\d+), in (.*)$', re.M)


def bare_run(tmp_path, mode):
    """The oracle: the same program without faultline."""
    (tmp_path / "bare").mkdir(exist_ok=True)
    script = tmp_path / "bare" / "job.py"  # the same name as run_py's
    script.write_text(PROGRAM)
    return subprocess.run([SYSTEM_PYTHON, str(script), mode, "bare"],
                          capture_output=True, text=True, timeout=120)


def exception_reports(run):
    return [r for r in run.reports if r["kind"] == "exception"]


def test_enable_reports_the_exception(tmp_path):
    run = run_py(PROGRAM, tmp_path, args=["enable"])
    bare = bare_run(tmp_path, "enable")
    assert run.returncode == bare.returncode == 1
    # The previous hook printed the traceback as before; faultline's line after it.
    assert bare.stderr.replace("/bare/job.py", "/job.py") in run.stderr, run.stderr
    assert run.stderr.index("RuntimeError: Timed out") < run.stderr.index("faultline: report written")
    (r,) = exception_reports(run)
    fltest.validate(r)
    e = r["exception"]
    assert e["language"] == "python"
    assert e["type"] == "RuntimeError"
    assert e["message"] == "Timed out waiting 1800ms for recv operation to complete"
    # The text is what Python printed, and the frames are its File lines, innermost last.
    assert e["text"] in run.stderr
    printed = [(f, int(n), fn) for f, n, fn in TRACEBACK_FRAME.findall(e["text"])]
    assert [(f["file"], f["line"], f["function"]) for f in e["traceback"]] == printed
    assert [f["function"] for f in e["traceback"]][-2:] == ["train", "poison_step"]
    d = r["diagnosis"]
    assert d["category"] == "python-exception"
    assert d["summary"].startswith("uncaught Python exception RuntimeError: Timed out")
    assert "in poison_step at job.py:" in d["summary"]
    # Every thread's Python stack: the helper's too. The helper is not
    # interrupted for its native stack (the process may go on).
    helper = [t for t in r["threads"]
              if any(f.get("function") == "helper_wait" for f in t["frames"])]
    assert len(helper) == 1 and helper[0]["tid"] != r["crashed_tid"]
    assert all(f["kind"] == "python" for f in helper[0]["frames"])
    assert "not interrupted" in helper[0]["note"]
    assert r["crashed_tid"] == r["process"]["pid"]
    # The command reads it: validate, show, and the signature recomputed offline.
    path = os.path.join(run.report_dir, [n for n in fltest.listdir(run.report_dir)
                                         if n.endswith(".json")][0])
    assert fltest.cli("validate", path).returncode == 0
    shown = fltest.cli("show", path, env={"NO_COLOR": "1"})
    assert shown.returncode == 0, shown.stderr
    assert "Uncaught Python exception in process" in shown.stdout
    assert "RuntimeError: Timed out waiting 1800ms" in shown.stdout
    unsigned = dict(r, diagnosis=dict(d, signature=""))
    (tmp_path / "unsigned").mkdir()
    (tmp_path / "unsigned" / "faultline-unsigned.json").write_text(json.dumps(unsigned))
    triaged = fltest.cli("triage", "--json", str(tmp_path / "unsigned"))
    assert triaged.returncode == 0, triaged.stderr
    assert d["signature"] in triaged.stdout


def test_previous_hook_still_runs(tmp_path):
    run = run_py(PROGRAM, tmp_path, args=["custom"])
    assert run.returncode == 1
    assert "custom hook saw RuntimeError" in run.stdout
    assert run.stderr.count("RuntimeError: Timed out") == 1, run.stderr
    # faultline's hook is there twice (enable() over the custom hook): one report.
    assert len(exception_reports(run)) == 1


def test_thread_exception(tmp_path):
    run = run_py(PROGRAM, tmp_path, args=["thread"])
    bare = bare_run(tmp_path, "thread")
    assert run.returncode == bare.returncode == 0
    assert "main goes on" in run.stdout
    assert 'Exception in thread worker' in run.stderr
    (r,) = exception_reports(run)
    fltest.validate(r)
    assert r["exception"]["type"] == "ValueError"
    assert r["exception"]["traceback"][-1]["function"] == "in_thread"
    # Reported from the thread that raised it, not the main thread.
    assert r["crashed_tid"] != r["process"]["pid"]
    assert any(t["tid"] == r["crashed_tid"] for t in r["threads"])


@pytest.mark.parametrize("mode", ["interrupt", "exit"])
def test_no_report_for_interrupt_and_exit(tmp_path, mode):
    run = run_py(PROGRAM, tmp_path, args=[mode])
    bare = bare_run(tmp_path, mode)
    assert run.returncode == bare.returncode
    assert exception_reports(run) == []


def test_startup_hook_in_a_preloaded_job(tmp_path):
    """No `import faultline` in the job: the package's start-up hook (the
    .pth file, processed here by site.addsitedir as site does at start-up)
    chains the hooks when LD_PRELOAD names the library."""
    reports = tmp_path / "reports"
    reports.mkdir()
    script = tmp_path / "job.py"
    script.write_text(PROGRAM)
    boot = (f"import site, sys; site.addsitedir({PYTHONPATH!r}); sys.argv = sys.argv[1:]; "
            f"exec(compile(open(sys.argv[0]).read(), sys.argv[0], 'exec'))")
    env = {"PYTHONPATH": "", "FAULTLINE_CLI": fltest.CLI}
    run = fltest.run([SYSTEM_PYTHON, "-c", boot, str(script), "enable", "bare"], env=env,
                     report_dir=str(reports))
    assert run.returncode == 1
    (r,) = exception_reports(run)
    fltest.validate(r)
    assert r["exception"]["type"] == "RuntimeError"
    # The hook is chained at start-up without importing threading (a
    # program's gevent patches must still come first).
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\n"
                     "print('threading' in sys.modules, sys.excepthook._faultline_hook)\n")
    seen = fltest.run([SYSTEM_PYTHON, "-c", boot, str(probe)], env=env, report_dir=str(reports))
    assert seen.stdout.split() == ["False", "True"], seen.stdout + seen.stderr
    # Off with FAULTLINE_EXCEPTION_REPORTS=0.
    off = tmp_path / "off"
    off.mkdir()
    run = fltest.run([SYSTEM_PYTHON, "-c", boot, str(script), "enable", "bare"],
                     env=dict(env, FAULTLINE_EXCEPTION_REPORTS="0"), report_dir=str(off))
    assert run.returncode == 1 and run.reports == []


# A thread raises while the main thread waits in epoll_wait (called through
# ctypes: Python's own select.epoll retries EINTR and would hide it). The
# worker raises only once /proc shows the main thread inside the wait.
QUIET_PROGRAM = """
import ctypes, os, signal, sys, threading
MODE = sys.argv[1]
BARE = sys.argv[2:] == ["bare"]
if not BARE:
    import faultline
    faultline.enable()
libc = ctypes.CDLL(None, use_errno=True)
main_tid = threading.get_native_id()
def main_waiting():
    try:
        with open(f"/proc/self/task/{main_tid}/wchan") as f:
            return "poll" in f.read()
    except OSError:
        return False
def worker():
    if MODE == "blocked":
        # The dump signal blocked on the raising thread: the report is still made.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    while not main_waiting():
        threading.Event().wait(0.01)
    raise RuntimeError("worker failed")
def wait_in_epoll():
    epfd = libc.epoll_create1(0)
    events = ctypes.create_string_buffer(64)
    threading.Thread(target=worker, name="worker").start()
    rc = libc.epoll_wait(epfd, events, 1, 3000)
    print("epoll_wait", rc, ctypes.get_errno() if rc < 0 else 0, flush=True)
wait_in_epoll()
"""


@pytest.mark.parametrize("mode", ["plain", "blocked"])
def test_thread_exception_interrupts_no_other_thread(tmp_path, mode):
    """First law: the process goes on after a thread's uncaught exception,
    so the report signals no other thread. The main thread's epoll_wait
    times out (0) as without faultline, not -1 EINTR. The report still has
    the raising thread's native stack and every thread's Python stack."""
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "job.py").write_text(QUIET_PROGRAM)
    bare = subprocess.run([SYSTEM_PYTHON, str(tmp_path / "bare" / "job.py"), mode, "bare"],
                          capture_output=True, text=True, timeout=120)
    assert "epoll_wait 0 0" in bare.stdout, bare.stdout + bare.stderr
    run = run_py(QUIET_PROGRAM, tmp_path, preload=True, args=[mode],
                 env={"FAULTLINE_DUMP": "1"})
    assert run.returncode == bare.returncode == 0
    assert "epoll_wait 0 0" in run.stdout, run.stdout + run.stderr
    (r,) = exception_reports(run)
    fltest.validate(r)
    assert r["exception"]["type"] == "RuntimeError"
    raising = [t for t in r["threads"] if t["tid"] == r["crashed_tid"]]
    assert len(raising) == 1 and raising[0]["captured"]
    assert any(f["kind"] == "native" for f in raising[0]["frames"])
    # Its Python frames: threading's hook call, under which faultline reports.
    assert any(f["kind"] == "python" and f["function"] == "_bootstrap_inner"
               for f in raising[0]["frames"])
    main = [t for t in r["threads"] if t["tid"] == r["process"]["pid"]]
    assert len(main) == 1 and main[0]["tid"] != r["crashed_tid"]
    # Python frames only, and a note saying why.
    assert [f["kind"] for f in main[0]["frames"]] and \
        all(f["kind"] == "python" for f in main[0]["frames"])
    assert any(f.get("function") == "wait_in_epoll" for f in main[0]["frames"])
    assert "not interrupted" in main[0]["note"]
