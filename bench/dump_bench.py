#!/usr/bin/env python3
"""Benchmark (not a test): a live dump of one 64-thread job, three ways.

    bench/dump_bench.py [--cli build/bin/faultline] [--threads 64] [--rounds 20]
                        [--also-cli NAME=PATH ...]

Starts bench_threads N (N threads, each 50 frames deep, then blocked) under
the preload with FAULTLINE_DUMP=1, and times, interleaved round by round on
that same process: `faultline dump --method ptrace` (stopped from outside),
`faultline dump --method signal` (faultline's handler in the process answers)
and `eu-stack -p` (elfutils, also ptrace). Wall time of the whole command,
as a user waits for it; prints each one's median and its ratio to ptrace's,
and for faultline's the median capture_ns of their reports (ptrace: the time
the threads were stopped). --also-cli adds another build's ptrace dump to
the rounds (e.g. before a change), named NAME.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "build")


def timed(cmd):
    """Wall seconds of cmd, and the capture_ns of the report it names (None
    when it names none)."""
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr}")
    path = r.stdout.strip()
    if path.endswith(".json") and os.path.exists(path):
        with open(path) as f:
            return dt, json.load(f)["faultline"].get("capture_ns")
    return dt, None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(BUILD, "bin", "faultline"))
    ap.add_argument("--lib", default=os.path.join(BUILD, "lib", "libfaultline.so"))
    ap.add_argument("--job", default=os.path.join(BUILD, "bench", "bench_threads"))
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--also-cli", action="append", default=[], metavar="NAME=PATH")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, LD_PRELOAD=args.lib, FAULTLINE_DUMP="1", FAULTLINE_DIR=d)
        job = subprocess.Popen([args.job, str(args.threads)], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        try:
            assert job.stdout.readline().strip() == "ready"
            pid = str(job.pid)
            ways = {
                "ptrace": [args.cli, "dump", "--print-path", "--method", "ptrace", pid],
                "signal": [args.cli, "dump", "--print-path", "--method", "signal", pid],
            }
            for spec in args.also_cli:
                name, _, cli = spec.partition("=")
                ways[name] = [cli, "dump", "--print-path", "--method", "ptrace", pid]
            if shutil.which("eu-stack"):
                ways["eu-stack -p"] = ["eu-stack", "-p", pid]
            times = {w: [] for w in ways}
            captures = {w: [] for w in ways}
            for _ in range(args.rounds):
                for w, cmd in ways.items():
                    dt, capture_ns = timed(cmd)
                    times[w].append(dt)
                    if capture_ns is not None:
                        captures[w].append(capture_ns / 1e6)
                    for f in os.listdir(d):  # keep the directory listing small
                        os.unlink(os.path.join(d, f))
            assert job.poll() is None, "the job did not survive the dumps"
        finally:
            job.kill()
            job.wait()
    base = statistics.median(times["ptrace"])
    print(f"{args.threads} threads, {args.rounds} rounds, interleaved")
    print("wall: the whole command; capture: the report's capture_ns (ptrace: the time")
    print("the threads were stopped; signal: the handler's capture in the process)")
    print(f"{'method':<14} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'/ ptrace':>9} "
          f"{'capture ms':>11}")
    for w, ts in times.items():
        m = statistics.median(ts)
        cap = f"{statistics.median(captures[w]):>11.1f}" if captures[w] else f"{'-':>11}"
        print(f"{w:<14} {m * 1e3:>10.1f} {min(ts) * 1e3:>8.1f} {max(ts) * 1e3:>8.1f} "
              f"{m / base:>9.2f} {cap}")


if __name__ == "__main__":
    main()
