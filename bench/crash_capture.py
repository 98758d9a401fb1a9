#!/usr/bin/env python3
"""Benchmark (not a test): how long faultline takes from the signal to the
report renamed into place, for 1, 16, 64 and 256 threads with ~50-frame
stacks, against `eu-stack -p PID` capturing the same process in the same run;
plus the arena use, the per-thread alternate-stack cost and the preload's
start-up cost.

    python3 bench/crash_capture.py [BUILD_DIR] [--runs 21]

faultline's time is the report's own capture_ns (from the handler's claim
of the dump to the report's last field) of live dumps, which run the same capture as a crash; each dump is
also timed from the outside (signal sent to file present). Medians are
quoted, and ratios against eu-stack measured in the same run. The start-up
line is bench/python_startup.py's measurement (startup_pair).

bench/perf.py times eu-stack with eu_stack_time() and reads RSS with
rss_kib().
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import python_startup

HERE = os.path.dirname(os.path.abspath(__file__))


def start(build, n, env_extra=None, preload=True):
    d = tempfile.mkdtemp(prefix="fl-bench-")
    env = dict(os.environ, FAULTLINE_DIR=d, FAULTLINE_DUMP="1", FAULTLINE_STDERR="0")
    if preload:
        env["LD_PRELOAD"] = os.path.join(build, "lib", "libfaultline.so")
    env.update(env_extra or {})
    p = subprocess.Popen([os.path.join(build, "bench", "bench_threads"), str(n)], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    return p, d


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def dump_times(p, d, runs):
    inside, outside, used = [], [], []
    for _ in range(runs):
        before = set(os.listdir(d))
        t0 = time.perf_counter()
        os.kill(p.pid, signal.SIGUSR2)
        while True:
            new = set(os.listdir(d)) - before
            if any(n.endswith(".json") and not n.startswith(".") for n in new):
                break
            time.sleep(0.0002)
        outside.append(time.perf_counter() - t0)
        name = [n for n in new if n.endswith(".json")][0]
        with open(os.path.join(d, name)) as f:
            rep = json.load(f)
        inside.append(rep["faultline"]["capture_ns"] / 1e9)
        used.append(rep["faultline"]["arena_bytes_used"])
        frames = sum(len(t["frames"]) for t in rep["threads"])
    return statistics.median(inside), statistics.median(outside), max(used), frames


def eu_stack_time(pid, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(["eu-stack", "-p", str(pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--runs", type=int, default=21)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    print(f"{'threads':>8} {'frames':>7} {'faultline (in)':>15} {'(outside)':>10} {'eu-stack':>10} "
          f"{'ratio':>7} {'arena used':>11}")
    for n in (1, 16, 64, 256):
        p, d = start(build, n)
        try:
            inside, outside, used, frames = dump_times(p, d, a.runs)
            eu = eu_stack_time(p.pid, max(5, a.runs // 3))
        finally:
            p.stdin.close()
            p.wait()
        print(f"{n + 1:>8} {frames:>7} {inside * 1e3:>12.2f} ms {outside * 1e3:>7.2f} ms "
              f"{eu * 1e3:>7.1f} ms {eu / outside:>6.1f}x {used / 1024:>8.0f} KiB")
    # Per-thread alternate stacks: RSS of 256 threads with and without them.
    p1, _ = start(build, 256, {"FAULTLINE_THREAD_ALTSTACKS": "1"})
    p0, _ = start(build, 256, {"FAULTLINE_THREAD_ALTSTACKS": "0"})
    r1, r0 = rss_kib(p1.pid), rss_kib(p0.pid)
    for p in (p0, p1):
        p.stdin.close()
        p.wait()
    print(f"alternate stacks: 256 threads RSS {r1} KiB with, {r0} KiB without "
          f"({(r1 - r0) / 256:.1f} KiB per thread; 68 KiB of address space each)")
    (base, _), (with_fl, _) = python_startup.startup_pair(
        ["/usr/bin/python3", "-c", "pass"], os.path.join(build, "lib", "libfaultline.so"), 45)
    print(f"start-up: python3 -c pass {base * 1e3:.1f} ms without, {with_fl * 1e3:.1f} ms with the "
          f"preload (ratio {with_fl / base:.3f})")


if __name__ == "__main__":
    sys.exit(main())
