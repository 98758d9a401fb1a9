#!/usr/bin/env python3
"""Benchmark (not a test): what the minidump costs a crash. A process with 64
threads ~50 frames deep (bench_threads) crashes on its main thread, with
FAULTLINE_MINIDUMP=1 and =0 alternately in the same run, so machine noise
hits both alike.

    python3 bench/minidump_bench.py [BUILD_DIR] [--runs 15] [--threads 64] [--dir DIR]

Reported, as medians: the report's capture_ns (the handler's claim of the
crash to the report's last field, with the minidump), the minidump phase's own
time and the minidump's size from the report, and the wall time from the
crash request to the process's exit (the whole handler, both files fsync'd).
--dir: where the reports go (default a temporary directory; pass one on the
disk you care about: fsync costs what the filesystem makes it cost).
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


def one_crash(build, threads, minidump, parent):
    d = tempfile.mkdtemp(prefix="fl-mdbench-", dir=parent)
    try:
        env = dict(os.environ, LD_PRELOAD=os.path.join(build, "lib", "libfaultline.so"), FAULTLINE_DIR=d,
                   FAULTLINE_STDERR="0", FAULTLINE_MINIDUMP="1" if minidump else "0")
        p = subprocess.Popen([os.path.join(build, "bench", "bench_threads"), str(threads)], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        assert p.stdout.readline() == b"ready\n"
        t0 = time.perf_counter()
        p.stdin.write(b"crash\n")
        p.stdin.flush()
        p.wait()
        wall = time.perf_counter() - t0
        (name,) = [n for n in os.listdir(d) if n.endswith(".json")]
        with open(os.path.join(d, name)) as f:
            rep = json.load(f)
        fl = rep["faultline"]
        assert (rep["minidump"] is not None) == minidump, fl["errors"]
        return {"capture": fl["capture_ns"] / 1e6, "wall": wall * 1e3,
                "phase": fl["phases_ns"].get("minidump", 0) / 1e6,
                "bytes": fl.get("minidump_bytes", 0), "threads": len(rep["threads"])}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    on, off = [], []
    for _ in range(a.runs):
        on.append(one_crash(build, a.threads, True, a.dir))
        off.append(one_crash(build, a.threads, False, a.dir))

    def med(runs, key):
        return statistics.median(r[key] for r in runs)
    print(f"{a.threads + 1} threads, {a.runs} crashes each, medians, reports in {a.dir or tempfile.gettempdir()}")
    print(f"{'':14} {'capture':>10} {'wall':>10} {'minidump phase':>15} {'minidump size':>14}")
    for label, runs in (("minidump off", off), ("minidump on", on)):
        print(f"{label:14} {med(runs, 'capture'):>7.2f} ms {med(runs, 'wall'):>7.2f} ms "
              f"{med(runs, 'phase'):>12.2f} ms {med(runs, 'bytes') / 1024:>10.0f} KiB")
    print(f"ratio on/off: capture x{med(on, 'capture') / med(off, 'capture'):.2f}, "
          f"wall x{med(on, 'wall') / med(off, 'wall'):.2f}; "
          f"added: capture +{med(on, 'capture') - med(off, 'capture'):.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
