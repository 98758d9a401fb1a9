#!/usr/bin/env python3
"""Benchmark (not a test): what a fault that the program's own handler
recovers from costs with faultline installed in front of that handler,
against the same program without faultline, in the same run.

    python3 bench/recovered_faults.py [BUILD_DIR] [--faults 100000] [--runs 7]

test/programs/recovering.c takes COUNT faults on a guard page, recovered by
moving the context's pc (a JVM's way: `rewrite`) or by siglongjmp (`probe`),
and times its loop. faultline is linked and installed after the handler
(`before`: the handler runs first) or not installed (`none`). Medians of the
loop time per fault, and their ratio.
"""
import argparse
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def loop_ns(build, order, mode, faults):
    d = tempfile.mkdtemp(prefix="fl-bench-")
    env = dict(os.environ, FAULTLINE_DIR=d, FAULTLINE_STDERR="0", RECOVERING_TIME="1")
    env.pop("LD_PRELOAD", None)
    p = subprocess.run([os.path.join(build, "test-programs", "recovering"), order, mode, str(faults)],
                       env=env, capture_output=True, text=True, timeout=600)
    lines = dict(line.split() for line in p.stdout.splitlines())
    return int(lines["loop_ns"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--faults", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    for mode in ("rewrite", "probe"):
        per = {}
        for order in ("none", "before"):
            per[order] = statistics.median(
                loop_ns(a.build, order, mode, a.faults) / a.faults for _ in range(a.runs))
        print(f"{mode:8} without faultline {per['none']:8.0f} ns/fault, with {per['before']:8.0f} "
              f"ns/fault, ratio {per['before'] / per['none']:.2f}")


if __name__ == "__main__":
    main()
