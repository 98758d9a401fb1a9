"""A segfault in a DataLoader worker's Dataset.__getitem__: PyTorch installs
its own SIGSEGV handler in each worker after start-up (it prints a line,
resets to the default and raises, never calling the handler it replaced).
faultline stays in front by default, runs that handler first, and reports
the original fault from the worker; the parent's DataLoader behaves as
without faultline (it raises "DataLoader worker (pid N) exited
unexpectedly" or "... is killed by signal")."""
import os
import re

import pytest

import rootrun

import fltest

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dataloader_job.py")
WORKER_DIED = re.compile(r"PARENT: DataLoader worker \(pids?(?:\(s\))? (\d+)")


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_a_worker_segfault_is_reported_and_the_parent_fails_as_without_faultline(tmp_path, method):
    (tmp_path / "bare").mkdir()
    (tmp_path / "preloaded").mkdir()
    bare = rootrun.run(["python3", JOB, method], tmp_path / "bare", preload=False)
    assert bare.returncode == 7 and WORKER_DIED.search(bare.stdout), bare.stdout + bare.stderr
    r = rootrun.run(["python3", JOB, method], tmp_path / "preloaded")
    assert r.returncode == 7, r.stdout + r.stderr
    died = WORKER_DIED.search(r.stdout)
    assert died, r.stdout + r.stderr
    assert "ERROR: Unexpected segmentation fault encountered in worker." in r.stderr, r.stderr
    assert r.reports, r.stderr
    assert int(died.group(1)) in [rep["process"]["pid"] for rep in r.reports], r.stdout
    for rep in r.reports:
        fltest.validate(rep)
        assert rep["signal"]["name"] == "SIGSEGV" and rep["signal"]["fault_address"] == "0x0"
        py = [f["function"] for f in rootrun.python_frames(fltest.crashed_thread(rep))]
        assert "__getitem__" in py and "_worker_loop" in py, py
        assert py.index("__getitem__") < py.index("_worker_loop"), py
