"""Job identity: under torchrun (TORCHELASTIC_RUN_ID set) a crash report has a
top-level "job" object read from the launcher's environment; without it,
none. The report validates against the schema either way."""
import json
import socket

import fltest

CRASHER = fltest.program("crasher")

TORCHRUN_ENV = {
    "TORCHELASTIC_RUN_ID": "3f9c1e-job",
    "RANK": "5",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "8",
    "GROUP_RANK": "2",
    "TORCHELASTIC_RESTART_COUNT": "3",
    "MASTER_ADDR": "10.1.2.3",
    "MASTER_PORT": "29500",
}


def test_crash_under_torchrun_names_the_job():
    r = fltest.run([CRASHER, "null-read"], env=TORCHRUN_ENV)
    rep = fltest.validate(r.report)
    assert rep["kind"] == "crash"
    assert rep["job"] == {
        "launcher": "torchrun", "run_id": "3f9c1e-job", "rank": 5, "local_rank": 1,
        "world_size": 8, "group_rank": 2, "restart_count": 3, "host": socket.gethostname(),
        "master_addr": "10.1.2.3", "master_port": 29500}
    # The job is also what `faultline job` reads: one job, this rank its root cause.
    out = fltest.cli("job", "--json", r.report_dir)
    jobs = json.loads(out.stdout)["jobs"]
    assert [(j["run_id"], j["root_cause"]["rank"]) for j in jobs] == [("3f9c1e-job", 5)]
    assert sorted(e["rank"] for e in jobs[0]["ranks"] if e["role"] == "missing") == [
        0, 1, 2, 3, 4, 6, 7]


def test_no_job_without_torchrun():
    env = {k: "" for k in TORCHRUN_ENV}
    env.update({"RANK": "5", "WORLD_SIZE": "8"})  # a rank number alone is not a job
    r = fltest.run([CRASHER, "null-read"], env=env)
    rep = fltest.validate(r.report)
    assert "job" not in rep


def test_numbers_that_are_not_numbers_are_null():
    env = dict(TORCHRUN_ENV, RANK="five", WORLD_SIZE="", MASTER_PORT="99999999999999999999999")
    del env["LOCAL_RANK"]
    r = fltest.run([CRASHER, "null-read"], env=env)
    rep = fltest.validate(r.report)
    job = rep["job"]
    assert job["rank"] is None and job["world_size"] is None and job["master_port"] is None
    assert job["local_rank"] is None and job["group_rank"] == 2
