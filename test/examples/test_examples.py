"""The examples do what their READMEs say."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import fltest

EXAMPLES = os.path.join(fltest.BUILD, "examples")
SOURCE_EXAMPLES = os.path.join(fltest.SOURCE, "examples")


def test_server_poisoned_request(tmp_path):
    sock = str(tmp_path / "server.sock")
    reports = tmp_path / "reports"
    reports.mkdir()
    env = dict(os.environ, FAULTLINE_DIR=str(reports), FAULTLINE_STDERR="0")
    env.pop("LD_PRELOAD", None)
    server = subprocess.Popen([os.path.join(EXAMPLES, "example_server"), sock, "4"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.stdout.readline().startswith(b"listening")
        out = subprocess.run([sys.executable, os.path.join(SOURCE_EXAMPLES, "server", "client.py"),
                              sock, "--requests", "1000", "--clients", "4", "--poison"],
                             capture_output=True, text=True, timeout=120)
        summary = json.loads(out.stdout)
        # No good request was lost before the crash.
        assert summary == {"sent": 1000, "answered": 1000, "poisoned": "poison-0001"}
        assert server.wait(timeout=30) == -signal.SIGSEGV
    finally:
        if server.poll() is None:
            server.kill()
    [name] = fltest.listdir(reports)
    rep = fltest.validate(json.load(open(reports / name)))
    t = fltest.crashed_thread(rep)
    assert t["annotations"]["request_id"] == "poison-0001"
    assert t["annotations"]["worker"].startswith("worker-")
    assert rep["annotations"]["service"] == "example-inference-server"
    syms = fltest.native_symbols(t)
    assert "run_kernel" in syms[0] and any("worker" in (s or "") for s in syms)
    # Every worker and reader thread is in the report.
    assert len(rep["threads"]) >= 5


def test_embedded_python_crash_in_cpp(tmp_path):
    exe = os.path.join(EXAMPLES, "example_embed")
    if not os.path.exists(exe):
        pytest.skip("python3-embed not available")
    r = fltest.run([exe], preload=False, env={"FAULTLINE_DIR": str(tmp_path)}, report_dir=str(tmp_path))
    assert r.returncode == -signal.SIGSEGV
    rep = fltest.validate(r.report)
    t = fltest.crashed_thread(rep)
    assert t["interleaved"] is True
    kinds = [(f["kind"], f.get("function") or f.get("symbol")) for f in t["frames"]]
    names = [n for _, n in kinds]
    i_sum = next(i for i, n in enumerate(names) if n and "tensor_sum" in n)
    i_fwd = names.index("forward")
    i_serve = names.index("serve")
    assert i_sum < i_fwd < i_serve
    assert kinds[i_fwd][0] == "python"
    assert "forward at <string>:5" in rep["diagnosis"]["summary"]


def test_python_example_run_script(tmp_path):
    env = dict(os.environ, FAULTLINE_EXAMPLE_OUT=str(tmp_path))
    p = subprocess.run([os.path.join(SOURCE_EXAMPLES, "python-crash", "run.sh"), fltest.BUILD],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "status 139" in p.stdout
    [name] = [n for n in os.listdir(tmp_path) if n.startswith("faultline-")]
    rep = fltest.validate(json.load(open(tmp_path / name)))
    t = fltest.crashed_thread(rep)
    pyframes = [f["function"] for f in t["frames"] if f["kind"] == "python"]
    assert pyframes[:4] == ["native_kernel", "train_step", "train", "<module>"]
    assert rep["diagnosis"]["summary"].endswith("while running native_kernel at train.py:25")
    assert any(th.get("holds_gil") is False and th["frames"] for th in rep["threads"] if not th["crashed"])
