#!/usr/bin/env python3
"""Benchmark (not a test): faultline_dump_now() by the ptrace helper against
the signal request, interleaved.

    bench/dump_now_bench.py [--build build] [--rounds 30]

Starts two copies of test-programs/dumpnow in its "tolerant" mode (threads
waiting in poll, nanosleep, epoll_wait and waitpid(-1), each counting the
calls that return early and waiting again): one with the helper (found
beside the library), one with FAULTLINE_DUMP_HELPER=0. Asks them for a dump
in turn, round by round, and prints for each the median and the 90th
percentile of the time faultline_dump_now() took (measured in the program,
CLOCK_MONOTONIC), how the dump was captured, and how many system calls of
the waiters were disturbed (EINTR) over all the rounds.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def start(prog, d, env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    e.pop("LD_PRELOAD", None)
    e.update(env, FAULTLINE_DIR=d)
    p = subprocess.Popen([prog, "tolerant"], env=e, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def ask(p, command):
    p.stdin.write(command + "\n")
    p.stdin.flush()
    return p.stdout.readline().split()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    prog = os.path.join(args.build, "test-programs", "dumpnow")
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        jobs = {"helper": start(prog, d1, {}),
                "signal": start(prog, d2, {"FAULTLINE_DUMP_HELPER": "0"})}
        times = {k: [] for k in jobs}
        captures = {k: set() for k in jobs}
        try:
            for _ in range(args.rounds):
                for way, p in jobs.items():
                    _, rc, path, ns = ask(p, "dump")
                    assert rc == "0", (way, rc)
                    times[way].append(int(ns) / 1e6)
                    with open(path) as f:
                        captures[way].add(json.load(f).get("capture"))
                    os.unlink(path)
            print(f"{'way':8} {'median ms':>10} {'p90 ms':>8}  capture  disturbed calls "
                  f"({args.rounds} dumps, 4 waiting threads)")
            for way, p in jobs.items():
                check = ask(p, "check")
                t = sorted(times[way])
                p90 = t[min(len(t) - 1, int(len(t) * 0.9))]
                print(f"{way:8} {statistics.median(t):10.2f} {p90:8.2f}  "
                      f"{','.join(sorted(c or '?' for c in captures[way])):8} {check[-1]}")
        finally:
            for p in jobs.values():
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
