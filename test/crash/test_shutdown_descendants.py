"""Shutdown reports are the rank's alone: every process under a rank
inherits its job identity (TORCHELASTIC_RUN_ID, RANK), and torchrun stops a
rank by signalling its whole process group. A child started by fork, by
exec (subprocess) or by multiprocessing's forkserver writes no shutdown
report for its SIGTERM and ends as it would without faultline; the rank
(the parent here, started as torchrun starts one: a new session, the job's
variables) writes one. FAULTLINE_SHUTDOWN_REPORTS=1 reports in all of them.
The oracle is the same program without faultline."""
import os
import signal
import subprocess
import sys
import tempfile

import fltest

# The rank: a Python SIGTERM handler (the fork child inherits it), a fork
# child, an exec'd child, a forkserver worker. STOP=each: the rank stops
# its children one by one (as PyTorch terminate()s a DataLoader worker),
# then waits for its own SIGTERM; STOP=group: it waits, and the test
# signals the whole process group (as torchrun does).
RANK = r"""
import multiprocessing, os, signal, subprocess, sys, time
stop = sys.argv[1]
statuses = {}
children = {}
rank = os.getpid()
def on_term(signo, frame):
    if os.getpid() != rank:
        sys.exit(7)  # the fork child's copy
    for name, wait in children.items():
        if name not in statuses:
            statuses[name] = wait()
    print("rank stopped", sorted(statuses.items()), flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, on_term)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        os.write(w, b"f")
        time.sleep(3600)
    except SystemExit as e:  # the rank's handler, inherited
        os._exit(e.code)
    os._exit(0)
os.read(r, 1)
def fork_status(pid=pid):
    _, st = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(st)
children["fork"] = fork_status
exe = subprocess.Popen([sys.executable, "-c",
                        "import time; print('ready', flush=True); time.sleep(3600)"],
                       stdout=subprocess.PIPE, text=True)
assert exe.stdout.readline() == "ready\n"
children["exec"] = exe.wait
ctx = multiprocessing.get_context("forkserver")
up = ctx.Event()
worker = ctx.Process(target=exec, args=("import time\nup.set()\ntime.sleep(3600)", {"up": up}))
worker.start()
up.wait()
def worker_status():
    worker.join()
    return worker.exitcode
children["forkserver"] = worker_status
if stop == "each":
    os.kill(pid, signal.SIGTERM)
    exe.terminate()
    worker.terminate()
    for name, wait in children.items():
        statuses[name] = wait()
    print("children stopped", sorted(statuses.items()), flush=True)
print("ready", flush=True)
while True:
    time.sleep(3600)
"""

TORCHRUN = {"TORCHELASTIC_RUN_ID": "descendants-test", "RANK": "3", "WORLD_SIZE": "4",
            "LOCAL_RANK": "1", "GROUP_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "0"}


def run_rank(stop, env, preload=True):
    """Runs the rank in a session of its own, stops it; (status, stdout, reports)."""
    report_dir = tempfile.mkdtemp(prefix="faultline-descendants-")
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("FAULTLINE_", "TORCHELASTIC_")) and k != "LD_PRELOAD"}
    e.update(env)
    if preload:
        e["LD_PRELOAD"] = fltest.LIB
        e["FAULTLINE_DIR"] = report_dir
    p = subprocess.Popen([sys.executable, "-c", RANK, stop], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    out = []
    for line in p.stdout:
        out.append(line)
        if line == "ready\n":
            break
    if stop == "group":
        os.killpg(p.pid, signal.SIGTERM)
    else:
        p.send_signal(signal.SIGTERM)
    rest, err = p.communicate(timeout=120)
    return p.returncode, "".join(out) + rest, fltest.reports_in(report_dir), err, p.pid


def test_children_stopped_one_by_one_write_no_shutdown_report():
    baseline, base_out, _, _, _ = run_rank("each", TORCHRUN, preload=False)
    assert baseline == 7 and "('exec', -15), ('fork', 7), ('forkserver', -15)" in base_out
    status, out, reports, err, pid = run_rank("each", TORCHRUN)
    assert (status, out) == (baseline, base_out), err
    (rep,) = reports  # the rank's own
    fltest.validate(rep)
    assert rep["kind"] == "shutdown" and rep["process"]["pid"] == pid
    assert rep["job"]["rank"] == 3


def test_the_whole_process_group_stopped_gives_the_rank_s_report_alone():
    baseline, base_out, _, _, _ = run_rank("group", TORCHRUN, preload=False)
    assert baseline == 7
    status, out, reports, err, pid = run_rank("group", TORCHRUN)
    assert (status, out) == (baseline, base_out), err
    assert [(r["kind"], r["process"]["pid"]) for r in reports] == [("shutdown", pid)]


def test_the_setting_reports_in_every_process():
    env = dict(TORCHRUN, FAULTLINE_SHUTDOWN_REPORTS="1")
    baseline, base_out, _, _, _ = run_rank("each", env, preload=False)
    status, out, reports, err, pid = run_rank("each", env)
    assert (status, out) == (baseline, base_out), err
    assert all(r["kind"] == "shutdown" for r in reports)
    # The rank, its fork child, its exec'd child, the forkserver's worker.
    assert len({r["process"]["pid"] for r in reports}) == 4, [r["process"] for r in reports]
    assert pid in {r["process"]["pid"] for r in reports}
