"""faultline triage: 2,000 reports of 12 distinct crashes make exactly 12 groups."""

import json
import os
import time

import pytest

import reportgen
from clitest import run


def crash_of(path):
    with open(path) as f:
        return json.load(f)["annotations"]["test.crash"]


def test_2000_reports_of_12_crashes(tmp_path):
    counts = reportgen.write_reports(str(tmp_path), 2000)
    assert len(counts) == 12
    start = time.monotonic()
    r = run("triage", "--json", str(tmp_path))
    elapsed = time.monotonic() - start
    print(f"triage of 2000 reports: {elapsed:.3f} s")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["reports"] == 2000 and out["skipped"] == []
    assert len(out["groups"]) == 12
    assert sorted(g["count"] for g in out["groups"]) == sorted(counts.values())
    # Each group holds one crash only, and each crash is one group.
    seen = set()
    for g in out["groups"]:
        kinds = {crash_of(p) for p in g["reports"]}
        assert len(kinds) == 1, g["signature"]
        seen |= kinds
        assert g["representative"] == g["reports"][0]
        assert g["first_seen"] <= g["last_seen"]
        assert len(g["hosts"]) > 1 and g["processes"] == g["count"]
    assert len(seen) == 12
    assert elapsed < 20


def test_text_output(tmp_path):
    reportgen.write_reports(str(tmp_path), 60)
    r = run("triage", str(tmp_path))
    assert r.returncode == 0
    assert r.stdout.startswith("60 reports, 12 groups\n")
    assert r.stdout.count("e.g. ") == 12


def test_computed_signature_ignores_run_details(tmp_path):
    # Two reports of one crash without writer signatures, differing in every
    # run-specific detail, group together; a different signal does not.
    import random
    rng = random.Random(5)
    crash = next(c for c in reportgen.CRASHES if c["name"] == "inductor-kernel")
    for i in range(2):
        (tmp_path / f"r{i}.json").write_text(json.dumps(reportgen.make_report(crash, rng, i)))
    other = dict(crash, sig=("SIGBUS", 7, 2, "BUS_ADRERR"))
    (tmp_path / "r2.json").write_text(json.dumps(reportgen.make_report(other, rng, 2)))
    out = json.loads(run("triage", "--json", str(tmp_path)).stdout)
    assert sorted(g["count"] for g in out["groups"]) == [1, 2]


def test_no_recursive(tmp_path):
    reportgen.write_reports(str(tmp_path), 24)  # all in per-host subdirectories
    out = json.loads(run("triage", "--json", "--no-recursive", str(tmp_path)).stdout)
    assert out["reports"] == 0


def test_suppressed_crashes_are_counted_per_group(tmp_path):
    # Real crashes under FAULTLINE_SAME_CRASH_LIMIT=1/2: the second within the
    # window is counted, not written; the one after the window says so.
    import signal

    import fltest
    crasher = fltest.program("crasher")
    env = {"FAULTLINE_SAME_CRASH_LIMIT": "1/2"}
    start = time.time()
    runs = [fltest.run([crasher, "null-read"], report_dir=str(tmp_path), env=env) for _ in range(2)]
    assert [r.returncode for r in runs] == [-signal.SIGSEGV] * 2
    if "report suppressed: 1 crashes" not in runs[1].stderr:
        assert int(time.time()) - int(start) >= 2, runs[1].stderr  # only a slow machine may miss it
        pytest.skip("the two crashes straddled the 2 s window on this machine")
    time.sleep(max(0.0, int(start) + 2.2 - time.time()))
    fltest.run([crasher, "null-read"], report_dir=str(tmp_path), env=env)
    fltest.run([crasher, "abort"], report_dir=str(tmp_path), env=env)
    out = json.loads(run("triage", "--json", str(tmp_path)).stdout)
    by_count = sorted((g["count"], g["suppressed"]) for g in out["groups"])
    assert by_count == [(1, 0), (2, 1)]
    text = run("triage", str(tmp_path)).stdout
    assert text.count("1 more suppressed (FAULTLINE_SAME_CRASH_LIMIT)") == 1
