"""torchrun told the root cause: a worker that crashes under the preload
writes TORCHELASTIC_ERROR_FILE, and torch.distributed.elastic (Debian's
PyTorch 1.13) shows faultline's summary and stack in its failure summary."""
import datetime
import os
import subprocess

import pytest

import fltest

PYTHON = "/usr/bin/python3"
EXAMPLE = os.path.join(fltest.SOURCE, "examples", "torchrun", "train.py")
UNIT = os.path.join(fltest.BUILD, "test", "torch", "torch_unit_tests")

pytestmark = pytest.mark.skipif(
    subprocess.run([PYTHON, "-c", "import torch.distributed.run, numpy"], capture_output=True).returncode != 0,
    reason="python3-torch (Debian's PyTorch) is not installed for /usr/bin/python3")

READ_ERROR_FILE = r"""
import sys
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
f = ProcessFailure(local_rank=1, pid=4242, exitcode=-11, error_file=sys.argv[1])
print(ChildFailedError("train.py", {1: f}).format_msg())
"""


def test_error_file_is_what_torch_reads(tmp_path):
    # The writer's output, read by torch's own ProcessFailure / ChildFailedError.
    path = tmp_path / "error.json"
    subprocess.run([UNIT, "--elastic-file", str(path)], check=True)
    out = subprocess.run([PYTHON, "-c", READ_ERROR_FILE, str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "in an ATen operator (libtorch_cpu.so.1.13)" in out.stdout
    assert 'File "<eval_with_key>.0", line 5, in forward  [fx]' in out.stdout
    assert "libtorch_cpu.so.1.13!_ZN2at6native3sumERKNS_6TensorE+0x40  [aten]" in out.stdout
    assert "Signal 11" not in out.stdout  # the message torchrun shows without faultline
    # The capture's time (1764483000 in the sample), as torch formats it.
    assert datetime.datetime.fromtimestamp(1764483000).isoformat(sep="_") in out.stdout


def test_torchrun_root_cause_is_faultlines_summary(tmp_path):
    env = {"PYTHONPATH": os.path.join(fltest.SOURCE, "python"), "RANK0_SECONDS": "60",
           "OMP_NUM_THREADS": "1"}
    cmd = [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node=2", "--redirects", "2", "--tee", "2",
           "--master_port", "0", EXAMPLE]
    r = fltest.run(cmd, env=env, timeout=120, cwd=str(tmp_path))
    out = r.stdout + r.stderr
    assert r.returncode != 0
    # Rank 1's crash; rank 0 and the agent do not crash. Rank 0, stopped by
    # torchrun's SIGTERM, leaves a shutdown report (on by default under
    # torchrun); it writes no error file, so the root cause stays rank 1's.
    crashes = [x for x in r.reports if x.get("kind") != "shutdown"]
    shutdowns = [x for x in r.reports if x.get("kind") == "shutdown"]
    assert len(crashes) == 1, out
    assert [s["job"]["rank"] for s in shutdowns] == [0], out
    rep = crashes[0]
    assert rep["annotations"].get("rank") == "1"
    summary = rep["diagnosis"]["summary"]
    root = out[out.index("Root Cause"):] if "Root Cause" in out else ""
    assert root, out
    assert "exitcode  : -11" in root
    assert summary in root, (summary, root)
    assert "Signal 11 (SIGSEGV) received by PID" not in root
    assert "[aten]" in root
    assert os.path.basename(r.report_dir) in root or "faultline report:" in root
