#!/usr/bin/env python3
"""Benchmark (not a test): `faultline triage` over thousands of reports.

    bench/triage_bench.py [--cli build/bin/faultline] [--counts 2000,10000,50000]

Generates reports of the twelve test crashes (test/lib/reportgen.py) into a
temporary directory and times triage, best of three runs, text and --json.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Run directly (outside pytest), this script puts test/lib, the tests' shared
# helpers, on sys.path itself; test/conftest.py does it for pytest.
sys.path.insert(0, os.path.join(HERE, "..", "test", "lib"))
import reportgen  # noqa: E402


def best_of(n, cmd):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - start)
        if r.returncode != 0:
            sys.exit(f"{cmd} failed: {r.stderr.decode()}")
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "bin", "faultline"))
    ap.add_argument("--counts", default="2000,10000")
    ap.add_argument("--jobs", default="1,0", help="reader threads to compare (0: one per CPU)")
    args = ap.parse_args()
    print(f"{'reports':>8} {'MB':>7} {'jobs':>5} {'text s':>8} {'json s':>8} {'reports/s':>10}")
    for count in (int(c) for c in args.counts.split(",")):
        with tempfile.TemporaryDirectory() as d:
            reportgen.write_reports(d, count)
            size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
            for jobs in args.jobs.split(","):
                text = best_of(3, [args.cli, "triage", "-j", jobs, d])
                js = best_of(3, [args.cli, "triage", "--json", "-j", jobs, d])
                print(f"{count:>8} {size / 1e6:>7.1f} {jobs:>5} {text:>8.3f} {js:>8.3f} {count / text:>10.0f}")


if __name__ == "__main__":
    main()
