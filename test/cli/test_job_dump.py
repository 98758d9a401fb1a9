"""faultline job --dump RUN_ID DIR: a live dump of every local process of a
job (TORCHELASTIC_RUN_ID=RUN_ID in /proc/PID/environ) into DIR, then the
job's answer over it: where each rank waits, and which rank is not in the
collective the others are in. The job here is three real Python processes
with torchrun's variables, preloaded; rank 2 skipped the all_reduce the
others wait in and waits in a barrier. A rank's own child (a data loader
worker inherits the variables) is not dumped; the ranks go on afterwards."""
import json
import os
import subprocess
import shutil
import sys
import tempfile
import time
import uuid

import fltest

# A stand-in for torch.distributed, in a library directory as installed.
COLLECTIVES = '''
import time
def all_reduce(t):
    while True:
        time.sleep(3600)
def barrier():
    while True:
        time.sleep(3600)
'''

RANK = '''
import os, sys
sys.path.insert(0, sys.argv[1])
from torch.distributed import c10d as dist
rank = int(os.environ["RANK"])
if rank == 0 and os.fork() == 0:  # a worker of rank 0's, with its variables
    import time
    time.sleep(3600)
    os._exit(0)
def sync_grads(t):
    dist.all_reduce(t)  # USER: all_reduce
def end_of_epoch():
    dist.barrier()  # USER: barrier
print("ready", flush=True)
if rank != 2:
    sync_grads([1.0])
end_of_epoch()
'''


def user_line(path, call):
    with open(path) as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith("# USER: " + call))


def start_job(tmp_path, run_id, world_size=3):
    lib = tmp_path / "site-packages" / "torch" / "distributed"
    lib.mkdir(parents=True)
    (lib.parent / "__init__.py").write_text("")
    (lib / "__init__.py").write_text("")
    (lib / "c10d.py").write_text(COLLECTIVES)
    script = tmp_path / "train.py"
    script.write_text(RANK)
    reports = tmp_path / "own-reports"
    reports.mkdir()
    procs = []
    for rank in range(world_size):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("FAULTLINE_") or k in ("FAULTLINE_LIB", "FAULTLINE_CLI")}
        env.update({"LD_PRELOAD": fltest.LIB, "FAULTLINE_DUMP": "1", "FAULTLINE_DIR": str(reports),
                    "TORCHELASTIC_RUN_ID": run_id, "RANK": str(rank), "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(world_size), "GROUP_RANK": "0",
                    "TORCHELASTIC_RESTART_COUNT": "0"})
        p = subprocess.Popen([sys.executable, str(script), str(tmp_path / "site-packages")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
    for p in procs:
        assert p.stdout.readline() == "ready\n"
    time.sleep(0.5)  # past the print, into the collective
    return procs, script


def stop(procs):
    for p in procs:
        p.kill()
        p.wait()


def children_of(pid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def test_dump_job_shows_where_each_rank_waits(tmp_path):
    run_id = "dump-" + uuid.uuid4().hex[:8]
    procs, script = start_job(tmp_path, run_id)
    out_dir = tmp_path / "dumps"
    try:
        worker = children_of(procs[0].pid)
        assert worker
        r = fltest.cli("job", "--json", "--dump", run_id, str(out_dir))
        print(r.stderr)
        assert r.returncode == 0, r.stderr
        assert f"dumped 3 of 3 processes of job {run_id}" in r.stderr
        # Every rank goes on.
        assert all(p.poll() is None for p in procs)
        reports = [json.load(open(out_dir / n)) for n in sorted(os.listdir(out_dir))]
        assert sorted(rep["process"]["pid"] for rep in reports) == sorted(p.pid for p in procs)
        assert all(rep["kind"] == "dump" for rep in reports)
        for rep in reports:
            fltest.validate(rep)
        (job,) = json.loads(r.stdout)["jobs"]
        assert job["run_id"] == run_id and job["root_cause"] is None
        ranks = {e["rank"]: e for e in job["ranks"]}
        for k, (call, function) in {0: ("all_reduce", "sync_grads"),
                                    1: ("all_reduce", "sync_grads"),
                                    2: ("barrier", "end_of_epoch")}.items():
            w = ranks[k]["waiting_in"]
            assert (w["call"], w["function"], w["line"]) == (call, function,
                                                              user_line(script, call)), ranks[k]
        assert "rank 2" in job["note"] and "barrier" in job["note"], job["note"]
        text = fltest.cli("job", str(out_dir))
        print(text.stdout)
        assert "rank 2" in text.stdout and "barrier at train.py" in text.stdout
    finally:
        stop(procs)
        for pid in worker:
            os.kill(pid, 9)


def test_no_such_job(tmp_path):
    r = fltest.cli("job", "--dump", "no-such-job-" + uuid.uuid4().hex, str(tmp_path / "d"))
    assert r.returncode == 1
    assert "no process of job no-such-job-" in r.stderr


def test_unreadable_environments_are_named(tmp_path):
    """Another user's processes cannot be looked into: said, with their pids."""
    run_id = "dump-" + uuid.uuid4().hex[:8]
    procs, _ = start_job(tmp_path, run_id, world_size=1)
    try:
        top = tempfile.mkdtemp(prefix="faultline-job-dump-")
        os.chmod(top, 0o777)
        out = os.path.join(top, "d")
        r = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                            fltest.CLI, "job", "--dump", run_id, str(out)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "could not be read" in r.stderr and f" {procs[0].pid}" in r.stderr, r.stderr
        assert f"no process of job {run_id}" in r.stderr
        shutil.rmtree(top)
    finally:
        stop(procs)
