"""faultline triage on the real torch 2.x reports (test/data/real-torch2-*.json,
made by test/torch2/make-data.sh): one group per crash, golden text output."""

import glob
import os
import shutil

from clitest import DATA, GOLDEN, UPDATE_GOLDEN, run


def test_triage_golden(tmp_path):
    reports = sorted(glob.glob(os.path.join(DATA, "real-torch2-*.json")))
    assert len(reports) >= 4
    for p in reports:
        shutil.copy(p, tmp_path)
    r = run("triage", ".", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{len(reports)} reports, {len(reports)} groups\n")
    golden = os.path.join(GOLDEN, "real-torch2.triage.txt")
    if UPDATE_GOLDEN:
        with open(golden, "w") as f:
            f.write(r.stdout)
    with open(golden) as f:
        assert r.stdout == f.read(), "output differs from " + golden
