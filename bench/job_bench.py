#!/usr/bin/env python3
"""Benchmark (not a test): `faultline job` and `faultline triage` over the
reports of one large torchrun job.

    bench/job_bench.py [--cli build/bin/faultline] [--ranks 1024,2048,4096] [--jobs 1,0]

Writes the reports of a job of N ranks (test/lib/jobgen.py: made from a real
crash report, one rank crashed, the others stopped in all_reduce, 8 ranks a
host) and times both commands, best of three, --json. Time per thousand
reports should stay flat as N grows (linear in the input).
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "lib"))
sys.path.insert(0, HERE)
import jobgen  # noqa: E402
from triage_bench import best_of  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "bin", "faultline"))
    ap.add_argument("--ranks", default="1024,2048,4096")
    ap.add_argument("--jobs", default="1,0", help="reader threads to compare (0: one per CPU)")
    args = ap.parse_args()
    print(f"{'reports':>8} {'MB':>6} {'threads':>7} {'job s':>7} {'job s/1k':>9} "
          f"{'triage s':>9} {'triage s/1k':>11}")
    for ranks in (int(c) for c in args.ranks.split(",")):
        with tempfile.TemporaryDirectory() as d:
            jobgen.write_job(d, world_size=ranks, root=ranks // 3)
            size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
            for jobs in args.jobs.split(","):
                job = best_of(3, [args.cli, "job", "--json", "-j", jobs, d])
                tri = best_of(3, [args.cli, "triage", "--json", "-j", jobs, d])
                k = ranks / 1000
                print(f"{ranks:>8} {size / 1e6:>6.1f} {jobs:>7} {job:>7.3f} {job / k:>9.3f} "
                      f"{tri:>9.3f} {tri / k:>11.3f}")


if __name__ == "__main__":
    main()
