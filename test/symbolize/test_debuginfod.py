"""A stripped program whose debug file exists only on a debuginfod server:
Debian's real `debuginfod`, started on a loopback port over a folder holding
the debug file, stopped at the end. `faultline symbolize` must get the
report's lines from it (checked against llvm-symbolizer-14 on the unstripped
program), and must not ask anyone when DEBUGINFOD_URLS is unset."""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import symtools

PROGRAM = os.path.join(symtools.BUILD, "test", "symbolize", "symbolize_inline_heavy")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """(url, build-id, stripped program) with the debug file served by debuginfod."""
    if shutil.which("debuginfod") is None:
        pytest.skip("debuginfod is not installed (Debian package debuginfod)")
    served = tmp_path / "served"
    served.mkdir()
    stripped = tmp_path / "inline_heavy"
    subprocess.run(["objcopy", "--only-keep-debug", PROGRAM, str(served / "inline_heavy.debug")],
                   check=True)
    subprocess.run(["objcopy", "--strip-debug", "--strip-unneeded", PROGRAM, str(stripped)],
                   check=True)
    bid = symtools.build_id(str(stripped))
    port = free_port()
    log = open(tmp_path / "debuginfod.log", "w")
    proc = subprocess.Popen(["debuginfod", "-F", "-p", str(port), "-d", str(tmp_path / "db.sqlite"),
                             str(served)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        # Ready when the scan has indexed the debug file.
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/buildid/{bid}/debuginfo", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert proc.poll() is None, (tmp_path / "debuginfod.log").read_text()
            assert time.time() < deadline, "debuginfod did not index the debug file in 60 s"
            time.sleep(0.3)
        yield url, bid, stripped
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_lines_come_from_a_real_debuginfod_server(server, tmp_path):
    url, bid, stripped = server
    funcs = [f for f in symtools.function_symbols(PROGRAM) if f[1] > 32]
    _, addrs = symtools.random_addresses(funcs, 5, seed=3)
    oracle = symtools.llvm_addresses(PROGRAM, addrs)
    report = tmp_path / "report.json"
    report.write_text(json.dumps(symtools.report(
        [(str(stripped), bid)],
        [[symtools.native_frame(str(stripped), a, signal_frame=True) for a in addrs]])))

    alone = symtools.run_cli("symbolize", str(report), check=True)
    assert json.loads(alone.stdout)["modules"][0]["debug_source"] == "none"

    cache = tmp_path / "cache"
    env = {"DEBUGINFOD_URLS": url, "DEBUGINFOD_CACHE_PATH": str(cache)}
    out = json.loads(symtools.run_cli("symbolize", str(report), env=env, check=True).stdout)
    module = out["modules"][0]
    assert module["debug_source"] == "debuginfod"
    assert module["debug_file"].startswith(str(cache))
    for frame, a in zip(out["threads"][0]["frames"], addrs):
        expected = oracle[a]
        assert (frame["file"], frame["line"]) == (expected[-1]["file"], expected[-1]["line"])
        assert [(i["file"], i["line"]) for i in frame.get("inlined", [])] == \
            [(e["file"], e["line"]) for e in expected[:-1]]


def test_a_server_without_the_file_leaves_the_frames_alone(server, tmp_path):
    url, _, stripped = server
    report = tmp_path / "report.json"
    other = "ab" * 20  # a build-id nobody serves; the file here is then another build
    report.write_text(json.dumps(symtools.report(
        [(str(stripped), other)], [[symtools.native_frame(str(stripped), 0x1000)]])))
    env = {"DEBUGINFOD_URLS": url, "DEBUGINFOD_CACHE_PATH": str(tmp_path / "cache")}
    out = json.loads(symtools.run_cli("symbolize", str(report), env=env, check=True).stdout)
    assert out["modules"][0]["debug_source"] == "build-id mismatch"
    assert "line" not in out["threads"][0]["frames"][0]
