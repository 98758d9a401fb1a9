"""Soak: 500 crashing processes in a row, two at a time. Every one leaves
exactly one valid report, none hangs (the watchdog bounds each), and every
one dies by its own signal."""
import concurrent.futures
import json
import os

import fltest

MODES = ["null-read", "abort", "div-zero", "ud2", "bad-fnptr"]
EXPECTED = {"null-read": -11, "abort": -6, "div-zero": -8, "ud2": -4, "bad-fnptr": -11}


def one(i):
    mode = MODES[i % len(MODES)]
    r = fltest.run([fltest.program("crasher"), mode], env={"FAULTLINE_STDERR": "0"}, timeout=30)
    return mode, r


def test_500_crashes_500_reports():
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for mode, r in pool.map(one, range(500)):
            if r.returncode != EXPECTED[mode] or len(r.reports) != 1:
                failures.append((mode, r.returncode, len(r.reports), r.stderr[-300:]))
                continue
            names = fltest.listdir(r.report_dir)
            if len(names) != 1 or names[0].startswith("."):
                failures.append((mode, "stray files", names))
            fltest.validate(r.reports[0])
    assert failures == []
