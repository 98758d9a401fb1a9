#!/usr/bin/env python3
"""Benchmark (not a test): what a fault that the program's own handler
recovers from costs with faultline installed in front of that handler,
against the same program without faultline, in the same run.

    python3 bench/recovered_faults.py [BUILD_DIR] [--faults 100000] [--runs 7]

test/programs/recovering.c takes COUNT faults on a guard page, recovered by
moving the context's pc (a JVM's way: `rewrite`) or by siglongjmp (`probe`),
and times its loop. faultline is linked and installed after the handler
(`before`: the handler was there first), before it (`after`: a handler
installed later, kept behind faultline by FAULTLINE_STAY_IN_FRONT, the
default, and run first), before it with FAULTLINE_STAY_IN_FRONT=0 (`after,
displaced`: the later handler replaces faultline's, the old default), or not
installed (`none`). The configurations are interleaved run by run, so drift
of the machine weighs on each alike. Medians of the loop time per fault, and
their ratio to `none`.
"""
import argparse
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


CONFIGS = (
    ("none", "none", {}),
    ("before", "before", {}),
    ("after", "after", {}),
    ("after, displaced", "after", {"FAULTLINE_STAY_IN_FRONT": "0"}),
)


def loop_ns(build, order, mode, faults, extra):
    d = tempfile.mkdtemp(prefix="fl-bench-")
    env = dict(os.environ, FAULTLINE_DIR=d, FAULTLINE_STDERR="0", RECOVERING_TIME="1", **extra)
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
        samples = {name: [] for name, _, _ in CONFIGS}
        for _ in range(a.runs):
            for name, order, extra in CONFIGS:
                samples[name].append(loop_ns(a.build, order, mode, a.faults, extra) / a.faults)
        none = statistics.median(samples["none"])
        for name, _, _ in CONFIGS:
            med = statistics.median(samples[name])
            print(f"{mode:8} {name:17} {med:8.0f} ns/fault, ratio {med / none:.2f}")


if __name__ == "__main__":
    main()
