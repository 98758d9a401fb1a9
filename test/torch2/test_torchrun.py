"""torch 2.x in the root: torchrun with two ranks, rank 1 crashing in ATen.
torchrun's failure summary must show faultline's diagnosis (from the
TORCHELASTIC_ERROR_FILE the crash path writes) instead of "Signal 11"."""
import os

import rootrun

import fltest

EXAMPLE = os.path.join(fltest.SOURCE, "examples", "torchrun", "train.py")
TORCHRUN = os.path.join(rootrun.HERE, "torchrun_nolibuv.py")


def test_torchrun_root_cause_is_faultlines_diagnosis(tmp_path):
    r = rootrun.run(["python3", TORCHRUN, "--nproc_per_node=2", "--redirects", "2", "--tee", "2",
                     "--master_port", "0", EXAMPLE], tmp_path, env={"RANK0_SECONDS": "120"}, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    # Rank 1's crash; rank 0 and the agent do not crash. Rank 0, stopped by
    # torchrun's SIGTERM, leaves a shutdown report (on by default under
    # torchrun); it writes no error file, so the root cause stays rank 1's.
    crashes = [x for x in r.reports if x.get("kind") != "shutdown"]
    shutdowns = [x for x in r.reports if x.get("kind") == "shutdown"]
    assert len(crashes) == 1, out
    assert [s["job"]["rank"] for s in shutdowns] == [0], out
    rep = fltest.validate(crashes[0])
    assert rep["annotations"].get("rank") == "1"
    assert rep["annotations"].get("torch.version", "").startswith("2."), rep["annotations"]
    summary = rep["diagnosis"]["summary"]
    assert "in libtorch (ATen) (libtorch_cpu.so.2." in summary, summary
    assert "while running step at train.py:" in summary, summary
    assert "Root Cause" in out, out
    root = out[out.index("Root Cause"):]
    assert "exitcode  : -11" in root, root
    assert summary in root, (summary, root)
    assert "Signal 11 (SIGSEGV) received by PID" not in root
    assert 'File "' + EXAMPLE + '", line' in root and "[python]" in root and "[aten]" in root, root
    assert "faultline report: " + tmp_path.as_posix() in root, root
