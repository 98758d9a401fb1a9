"""One answer per job when a rank skips a collective, with real torchrun (4
ranks, gloo on CPU): ranks 0-2 wait in all_reduce for rank 3, which went on
to the next barrier; rank 0's group has a short timeout=, so gloo's
RuntimeError is raised there, uncaught: rank 0 leaves a report of kind
"exception" and torchrun stops the others with SIGTERM (shutdown reports).
`faultline job` names rank 0 the root cause, its exception's all_reduce
call, and rank 3 as the rank not in the others' collective, waiting in the
barrier; torchrun's exit status is the one it has without faultline."""
import json
import os

import rootrun

import fltest

JOB = os.path.join(rootrun.HERE, "timeout_job.py")


def user_line(call):
    return rootrun.user_line("USER: " + call, JOB)


def test_timed_out_rank_is_the_root_cause_the_skipper_shows_where_it_was(tmp_path):
    r, baseline = rootrun.torchrun_job(JOB, tmp_path)
    work = tmp_path / "with"
    out = r.stdout + r.stderr
    print(out[-4000:])
    assert r.returncode == baseline.returncode != 0, out
    assert "RuntimeError" in out
    for rep in r.reports:
        fltest.validate(rep)
    print(sorted((rep["job"]["rank"], rep["kind"]) for rep in r.reports))
    exc = [rep for rep in r.reports if rep["kind"] == "exception" and rep["job"]["rank"] == 0]
    assert len(exc) == 1, [(rep["job"]["rank"], rep["kind"]) for rep in r.reports]
    e = exc[0]["exception"]
    # torchrun prefixes each line of rank 0's stderr with "[rank0]:".
    printed = "\n".join(line[len("[rank0]: "):] if line.startswith("[rank0]: ") else line
                        for line in out.splitlines())
    assert e["type"] == "RuntimeError" and e["text"].rstrip("\n") in printed, e["text"]
    assert "Timed out" in e["message"]
    assert [f["function"] for f in e["traceback"] if f["file"] == JOB] == ["<module>", "sync_grads"]
    j = fltest.cli("job", "--json", str(work))
    assert j.returncode == 0, j.stderr
    (job,) = json.loads(j.stdout)["jobs"]
    print(json.dumps(job, indent=1))
    root = job["root_cause"]
    assert root["rank"] == 0 and root["kind"] == "exception", root
    ranks = {e["rank"]: e for e in job["ranks"]}
    w = ranks[0]["waiting_in"]
    assert (w["call"], w["function"], w["line"]) == ("all_reduce", "sync_grads",
                                                      user_line("all_reduce")), ranks[0]
    # The skipping rank: where it was. Stopped by torchrun's SIGTERM (a
    # shutdown report), or, when rank 0's exit closed its connection first,
    # failed with gloo's "Connection closed by peer": an exception that says
    # a peer went away, so never the root cause.
    three = ranks[3]
    assert three["role"] == "collateral" and three["kind"] in ("shutdown", "exception"), three
    w = three["waiting_in"]
    assert (w["call"], w["function"], w["line"]) == ("barrier", "end_of_epoch",
                                                      user_line("barrier")), three
    for k in (1, 2):
        assert ranks[k]["role"] == "collateral", ranks[k]
    text = fltest.cli("job", str(work)).stdout
    print(text)
    assert "root cause: rank 0 " in text
    assert "rank 3" in text and "barrier" in text
