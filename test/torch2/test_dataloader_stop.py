"""A rank with DataLoader workers (forkserver) stopped as torchrun stops
it, SIGTERM to its whole process group: the workers and the forkserver
inherit the rank's job variables and get the SIGTERM too, yet the job has
one shutdown report, the rank's; the rank ends as without faultline."""
import os
import re

import rootrun

import fltest

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dataloader_stop_job.py")
STOPPED = re.compile(r"rank (\d+) status (-?\d+)")


def test_a_stopped_rank_with_dataloader_workers_leaves_one_shutdown_report(tmp_path):
    (tmp_path / "bare").mkdir()
    (tmp_path / "preloaded").mkdir()
    bare = rootrun.run(["python3", JOB, "launch"], tmp_path / "bare", preload=False)
    base = STOPPED.search(bare.stdout)
    assert bare.returncode == 0 and base, bare.stdout + bare.stderr
    r = rootrun.run(["python3", JOB, "launch"], tmp_path / "preloaded")
    stopped = STOPPED.search(r.stdout)
    assert r.returncode == 0 and stopped, r.stdout + r.stderr
    assert stopped.group(2) == base.group(2), r.stdout + r.stderr
    assert [(rep["kind"], rep["process"]["pid"]) for rep in r.reports] == \
        [("shutdown", int(stopped.group(1)))], r.stderr
    fltest.validate(r.reports[0])
    assert r.reports[0]["job"]["run_id"] == "dataloader-stop" and r.reports[0]["job"]["rank"] == 0
