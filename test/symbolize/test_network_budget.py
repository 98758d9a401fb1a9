"""A stalled debuginfod server: one on 127.0.0.1 that accepts connections and
never answers (a dead proxy or mirror). `faultline symbolize` must end within
its network budget for the whole run (plus a second: a generous bound, the
fetches are concurrent), exit 0, keep and symbolize the frames it has local
debug information for, and name the modules that went without and why; a
second run remembers the server's silence instead of waiting again."""
import json
import os
import socket
import threading
import time

import pytest

import symtools

PROGRAM = os.path.join(symtools.BUILD, "test", "symbolize", "symbolize_inline_heavy")
MISSING = [f"/opt/gone/lib{i}.so" for i in range(3)]  # not here: only debuginfod could help


@pytest.fixture
def stalled_server():
    """A server that accepts every connection and never sends a byte."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held, stop = [], threading.Event()

    def accept():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", held
    stop.set()
    t.join()
    for c in held:
        c.close()
    sock.close()


def make_report(tmp_path):
    bid = symtools.build_id(PROGRAM)
    funcs = [f for f in symtools.function_symbols(PROGRAM) if f[1] > 32]
    _, addrs = symtools.random_addresses(funcs, 3, seed=5)
    modules = [(PROGRAM, bid)] + [(m, f"{i + 1:02x}" * 20) for i, m in enumerate(MISSING)]
    frames = [symtools.native_frame(PROGRAM, a, signal_frame=True) for a in addrs]
    frames += [symtools.native_frame(m, 0x1234, signal_frame=True) for m in MISSING]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(symtools.report(modules, [frames])))
    return path, len(addrs)


def run(report, url, tmp_path, *args, budget_env=None):
    env = {"DEBUGINFOD_URLS": url, "DEBUGINFOD_CACHE_PATH": str(tmp_path / "cache"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    if budget_env is not None:
        env["FAULTLINE_NETWORK_BUDGET"] = budget_env
    start = time.monotonic()
    p = symtools.run_cli("symbolize", str(report), *args, env=env)
    return p, time.monotonic() - start


def check_output(p, n_local):
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    frames = out["threads"][0]["frames"]
    assert len(frames) == n_local + len(MISSING)
    assert all("line" in f for f in frames[:n_local]), frames  # the rest symbolized as usual
    by_path = {m["path"]: m for m in out["modules"]}
    for m in MISSING:
        assert by_path[m]["debug_source"] == "none"
        assert "debuginfod:" in by_path[m]["debug_error"], by_path[m]
        assert m in p.stderr, p.stderr  # named, with the reason
    return by_path


def test_a_stalled_server_costs_the_budget_and_no_more(stalled_server, tmp_path):
    url, held = stalled_server
    report, n = make_report(tmp_path)
    p, wall = run(report, url, tmp_path, "--network-budget", "2")
    by_path = check_output(p, n)
    assert "no answer within the network budget of 2 s" in by_path[MISSING[0]]["debug_error"]
    # Three modules asked at once: each one's connection was open together.
    assert len(held) >= len(MISSING)
    assert wall < 2 + 1, f"symbolize took {wall:.1f} s with a budget of 2 s"


def test_the_budget_from_the_environment_and_the_silence_remembered(stalled_server, tmp_path):
    url, held = stalled_server
    report, n = make_report(tmp_path)
    p, wall = run(report, url, tmp_path, budget_env="1")
    check_output(p, n)
    assert wall < 1 + 1, f"symbolize took {wall:.1f} s with a budget of 1 s"
    asked = len(held)
    # Again: the server is not asked, the reason is the remembered one.
    p, _ = run(report, url, tmp_path, budget_env="1")
    by_path = check_output(p, n)
    assert "remembered from a run" in by_path[MISSING[1]]["debug_error"]
    time.sleep(0.5)  # let the accept loop see any late connection
    assert len(held) == asked


def test_a_bad_budget_is_refused(tmp_path):
    report, _ = make_report(tmp_path)
    p = symtools.run_cli("symbolize", str(report), "--network-budget", "soon")
    assert p.returncode == 2 and "--network-budget soon" in p.stderr
    p = symtools.run_cli("symbolize", str(report), env={"FAULTLINE_NETWORK_BUDGET": "-1"})
    assert p.returncode == 2 and "FAULTLINE_NETWORK_BUDGET" in p.stderr
