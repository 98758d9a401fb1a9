"""One answer per job, with real torchrun (4 ranks, gloo on CPU): rank 2
segfaults in poison_step while the others wait in all_reduce; torchrun
stops them with SIGTERM. Every rank leaves a report with its job; rank 2's
is the SIGSEGV crash, the others' are shutdown reports showing the
all_reduce call; `faultline job` names rank 2 the root cause; torchrun's
exit status is the one it has without faultline."""
import json
import os

import rootrun

import fltest

JOB = os.path.join(rootrun.HERE, "allreduce_job.py")


def user_line():
    return rootrun.user_line("USER: all_reduce", JOB)


def test_rank_2_is_the_root_cause_the_others_collateral(tmp_path):
    r, baseline = rootrun.torchrun_job(JOB, tmp_path)
    work = tmp_path / "with"
    out = r.stdout + r.stderr
    assert r.returncode == baseline.returncode != 0, out
    print(out[-4000:])
    by_rank = {rep["job"]["rank"]: fltest.validate(rep) for rep in r.reports}
    print({k: (v["kind"], v["signal"]["name"]) for k, v in by_rank.items()})
    assert by_rank[2]["kind"] == "crash" and by_rank[2]["signal"]["name"] == "SIGSEGV"
    assert all(rep["job"]["world_size"] == 4 for rep in r.reports)
    assert len({rep["job"]["run_id"] for rep in r.reports}) == 1
    j = fltest.cli("job", "--json", str(work))
    assert j.returncode == 0, j.stderr
    (job,) = json.loads(j.stdout)["jobs"]
    assert job["root_cause"]["rank"] == 2 and job["root_cause"]["signal"] == "SIGSEGV"
    # Every other rank is collateral. The ranks next to rank 2 in gloo's
    # ring may see its connection close and be on their way out (an
    # exception, then exit) when torchrun's SIGTERM comes: their reports
    # show no Python frame; the others show the all_reduce they wait in.
    waiting = []
    for e in job["ranks"]:
        if e["rank"] != 2:
            assert e["role"] == "collateral" and e["kind"] == "shutdown", e
            if e["waiting_in"]:
                waiting.append(e["rank"])
                w = e["waiting_in"]
                assert (w["call"], w["function"], os.path.basename(w["file"])) == (
                    "all_reduce", "sync_grads", "allreduce_job.py"), e
                assert w["line"] == user_line(), e
    assert waiting, job["ranks"]
    text = fltest.cli("job", str(work)).stdout
    print(text)
    assert "root cause: rank 2 " in text
