#!/usr/bin/env python3
"""Benchmark (not a test): how the CLI's time grows with the size of one report.

    bench/cli_scaling.py [--cli build/bin/faultline] [--n 50000] [--runs 5]

Builds reports from test/data/real-python-segv.json that are wide (N, 2N, 4N
breadcrumbs: one long array), and deep (one thread with N, 2N, 4N frames),
then times `show` and `triage` on each (median of --runs). Prints the medians
and each step's ratio to the one before: about 2.0 is linear, about 4.0
quadratic.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "test", "data", "real-python-segv.json")


def median_time(runs, cmd):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - start)
        if r.returncode != 0:
            sys.exit(f"{cmd} failed: {r.stderr.decode()}")
    return statistics.median(times)


def make(kind, n, base):
    doc = json.loads(json.dumps(base))
    if kind == "wide":
        doc["breadcrumbs"] = [{"message": f"step {i}"} for i in range(n)]
    else:
        frame = next(f for t in doc["threads"] for f in t["frames"] if f.get("kind") == "native")
        t = doc["threads"][0]
        t["frames"] = [dict(frame) for _ in range(n)]
        t["frames_total"] = n
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "bin", "faultline"))
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with open(DATA) as f:
        base = json.load(f)
    print(f"{'shape':>6} {'command':>8} {'N':>8} {'MB':>6} {'median s':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("wide", "deep"):
            for cmd in ("show", "triage"):
                prev = None
                for n in (args.n, 2 * args.n, 4 * args.n):
                    d = os.path.join(tmp, f"{kind}-{n}")
                    os.makedirs(d, exist_ok=True)
                    path = os.path.join(d, "faultline-x.json")
                    if not os.path.exists(path):
                        with open(path, "w") as f:
                            json.dump(make(kind, n, base), f)
                    target = path if cmd == "show" else d
                    t = median_time(args.runs, [args.cli, cmd, target])
                    ratio = f"{t / prev:.2f}" if prev else "-"
                    mb = os.path.getsize(path) / 1e6
                    print(f"{kind:>6} {cmd:>8} {n:>8} {mb:>6.1f} {t:>9.3f} {ratio:>6}")
                    prev = t


if __name__ == "__main__":
    main()
