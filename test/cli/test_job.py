"""faultline job: the reports of a torchrun job's ranks give one answer:
the rank that failed first, where the others waited, which left no report."""

import json
import os

import jobgen
from clitest import run


def job_json(directory, *extra):
    r = run("job", "--json", *extra, str(directory))
    return r, json.loads(r.stdout) if r.stdout.strip() else None


def test_crash_is_root_cause_others_collateral(tmp_path):
    paths = jobgen.write_job(str(tmp_path), world_size=4, root=2)
    r, out = job_json(tmp_path)
    assert r.returncode == 0, r.stderr
    (job,) = out["jobs"]
    assert job["run_id"] == "job-1" and job["world_size"] == 4
    root = job["root_cause"]
    assert root["rank"] == 2 and root["signal"] == "SIGSEGV"
    assert root["report"] == paths[2]
    assert "SIGSEGV" in root["diagnosis"]["summary"]
    assert job["ambiguity"] is None
    roles = {e["rank"]: e["role"] for e in job["ranks"]}
    assert roles == {0: "collateral", 1: "collateral", 2: "root-cause", 3: "collateral"}
    for e in job["ranks"]:
        if e["role"] == "collateral":
            w = e["waiting_in"]
            assert (w["call"], w["file"], w["line"], w["function"]) == (
                "all_reduce", "/job/train.py", 41, "sync_grads")
            assert w["text"] == "all_reduce at train.py:41 under sync_grads"
    text = run("job", str(tmp_path))
    assert text.returncode == 0
    assert "root cause: rank 2 " in text.stdout
    assert "all_reduce at train.py:41 under sync_grads" in text.stdout


def test_missing_ranks_and_restarts_are_separate(tmp_path):
    jobgen.write_job(str(tmp_path), world_size=8, root=5, missing=(3, 6))
    jobgen.write_job(str(tmp_path), world_size=8, root=1, restart=1)
    r, out = job_json(tmp_path)
    assert r.returncode == 0, r.stderr
    assert [(j["run_id"], j["restart_count"]) for j in out["jobs"]] == [("job-1", 0), ("job-1", 1)]
    first, second = out["jobs"]
    assert first["root_cause"]["rank"] == 5 and second["root_cause"]["rank"] == 1
    missing = [e["rank"] for e in first["ranks"] if e["role"] == "missing"]
    assert missing == [3, 6]
    assert all(e["report"] is None and e["waiting_in"] is None
               for e in first["ranks"] if e["role"] == "missing")
    assert len(second["ranks"]) == 8


def test_crash_before_the_exceptions_it_caused(tmp_path):
    # The others lose their peer and raise before torchrun stops them: the
    # crash is still the root cause, though an exception may be as early.
    jobgen.write_job(str(tmp_path), world_size=4, root=0, collateral_kind="exception",
                     delay_ms=0)
    for name in os.listdir(tmp_path):
        p = os.path.join(tmp_path, name)
        with open(p) as f:
            r = json.load(f)
        if r["kind"] == "exception":
            r["exception"]["message"] = "[gloo] Connection closed by peer [10.0.0.2]:1234"
            with open(p, "w") as f:
                json.dump(r, f)
    r, out = job_json(tmp_path)
    assert r.returncode == 0, r.stderr
    assert out["jobs"][0]["root_cause"]["rank"] == 0


def test_timeout_exception_is_root_cause(tmp_path):
    jobgen.write_job(str(tmp_path), world_size=4, root=1, root_kind="exception")
    r, out = job_json(tmp_path)
    assert r.returncode == 0, r.stderr
    root = out["jobs"][0]["root_cause"]
    assert root["rank"] == 1 and root["kind"] == "exception"
    assert "Timed out" in root["diagnosis"]["summary"]


def test_failures_on_two_hosts_close_in_time_are_ambiguous(tmp_path):
    base = jobgen.base_report()
    for rank, ms in ((0, 100), (9, 0)):  # different hosts (8 ranks a host)
        rep = jobgen.rank_report(base, "job-2", rank, 16, "crash", ms)
        with open(tmp_path / f"faultline-{rank}.json", "w") as f:
            json.dump(rep, f)
    r, out = job_json(tmp_path)
    job = out["jobs"][0]
    assert job["root_cause"]["rank"] == 9
    assert "rank 0" in job["ambiguity"] and "another host" in job["ambiguity"]
    assert "ambiguous:" in run("job", str(tmp_path)).stdout


def test_hang_names_no_root_cause_and_the_odd_rank(tmp_path):
    base = jobgen.base_report()
    for rank in range(4):
        call = "barrier" if rank == 3 else "all_reduce"
        rep = jobgen.rank_report(base, "job-3", rank, 4, "shutdown", rank, call=call,
                                 line=50 if rank == 3 else 41)
        with open(tmp_path / f"faultline-{rank}.json", "w") as f:
            json.dump(rep, f)
    r, out = job_json(tmp_path)
    assert r.returncode == 0, r.stderr
    job = out["jobs"][0]
    assert job["root_cause"] is None
    assert all(e["role"] == "collateral" for e in job["ranks"])
    assert "rank 3 is not in all_reduce" in job["note"]


def test_triage_counts_a_job_as_one_incident(tmp_path):
    jobgen.write_job(str(tmp_path), run_id="a", world_size=16, root=2)
    jobgen.write_job(str(tmp_path), run_id="b", world_size=16, root=7)
    r = run("triage", "--json", str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["reports"] == 32
    (g,) = out["groups"]  # both jobs crashed the same way: one group of two incidents
    assert g["count"] == 2 and g["jobs"] == 2 and len(g["reports"]) == 32
    assert g["summary"].startswith("SIGSEGV")


def test_empty_directory(tmp_path):
    r = run("job", str(tmp_path))
    assert r.returncode == 1
    assert "no reports" in r.stderr


def test_not_a_directory(tmp_path):
    r = run("job", str(tmp_path / "nope"))
    assert r.returncode == 1 and "not a directory" in r.stderr and not r.stdout


def test_reports_without_a_job(tmp_path):
    with open(tmp_path / "faultline-x.json", "w") as f:
        json.dump(jobgen.base_report(), f)
    r = run("job", str(tmp_path))
    assert r.returncode == 1 and "belongs to a job" in r.stderr


def test_malformed_reports_are_named_and_the_rest_analyzed(tmp_path):
    jobgen.write_job(str(tmp_path), world_size=4, root=2)
    (tmp_path / "faultline-trunc.json").write_text('{"schema": "faultline/1", "kind"')
    (tmp_path / "faultline-bin.json").write_bytes(b"\x00\x01\x02")
    (tmp_path / "faultline-list.json").write_text("[1, 2]")
    r, out = job_json(tmp_path)
    assert r.returncode == 1
    assert out["jobs"][0]["root_cause"]["rank"] == 2
    names = sorted(os.path.basename(s["path"]) for s in out["skipped"])
    assert names == ["faultline-bin.json", "faultline-list.json", "faultline-trunc.json"]
    text = run("job", str(tmp_path))
    assert text.returncode == 1 and "Skipped" in text.stdout and "faultline-trunc.json" in text.stdout
