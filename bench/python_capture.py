#!/usr/bin/env python3
"""Benchmark: capture time of faultline's Python part (capture_python: every
thread, every frame, with file/line/function/qualname) for 16 threads x 100
frames, against faulthandler.dump_traceback(all_threads=True) of the same
process, measured in one run. Not a test.

  bench/python_capture.py [BUILD_DIR] [--python INTERPRETER] [--iters N]

BUILD_DIR (default build-py) must have built the faultline target: the shim
links its crash-path objects (crash-objects.txt). Run it with the interpreter
under test; it re-executes itself with --python.
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
THREADS, DEPTH = 16, 100


def build_shim(build):
    objs = open(os.path.join(build, "crash-objects.txt")).read().split()
    out = os.path.join(tempfile.mkdtemp(prefix="faultline-bench-"), "libflbench.so")
    cmd = ["c++", "-std=c++17", "-O2", "-shared", "-fPIC", "-I", os.path.join(SOURCE, "src"),
           "-I", os.path.join(SOURCE, "include"), "-o", out, os.path.join(HERE, "python_capture_shim.cpp")]
    cmd += objs + ["-lunwind"]
    subprocess.run(cmd, check=True)
    return out


def deep(n, ready, stop):
    if n > 1:
        return deep(n - 1, ready, stop)
    ready.release()
    stop.wait()


def child(shim, iters):
    ready, stop = threading.Semaphore(0), threading.Event()
    # Each thread's own frames: DEPTH recursive calls on top of threading's.
    threads = [threading.Thread(target=deep, args=(DEPTH, ready, stop), daemon=True) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for _ in threads:
        ready.acquire()
    time.sleep(0.1)

    import faulthandler
    fh = []
    with tempfile.TemporaryFile() as f:
        for _ in range(iters):
            f.seek(0)
            t0 = time.perf_counter_ns()
            faulthandler.dump_traceback(file=f, all_threads=True)
            fh.append(time.perf_counter_ns() - t0)
    fh_null = []
    with open(os.devnull, "w") as f:
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            faulthandler.dump_traceback(file=f, all_threads=True)
            fh_null.append(time.perf_counter_ns() - t0)
    # PyDLL keeps the GIL during the call: the other threads stay parked.
    lib = ctypes.PyDLL(shim)
    lib.fl_bench_python_capture.restype = ctypes.c_long
    ns = (ctypes.c_long * iters)()
    frames = lib.fl_bench_python_capture(iters, ns, 256)
    fl = list(ns)
    stop.set()
    for t in threads:
        t.join()
    fh_med, fl_med = statistics.median(fh), statistics.median(fl)
    print(f"python {sys.version.split()[0]} ({sys.executable}), {THREADS} threads x {DEPTH} frames, {iters} runs each")
    print(f"  faulthandler.dump_traceback(all_threads): median {fh_med / 1000:.1f} us (max 100 frames/thread, text)")
    null_med = statistics.median(fh_null)
    print(f"  faulthandler to /dev/null:                median {null_med / 1000:.1f} us")
    print(f"  faultline capture_python:                 median {fl_med / 1000:.1f} us ({frames} structured frames)")
    print(f"  ratio faultline / faulthandler: {fl_med / fh_med:.2f} (file), {fl_med / null_med:.2f} (/dev/null)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(SOURCE, "build-py"))
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--iters", type=int, default=51)
    ap.add_argument("--child-shim")
    a = ap.parse_args()
    if a.child_shim:
        child(a.child_shim, a.iters)
        return
    shim = build_shim(a.build)
    # Preloaded: the crash-path objects use initial-exec TLS, which a late
    # dlopen cannot always place.
    env = dict(os.environ, LD_PRELOAD=shim)
    subprocess.run([a.python, os.path.abspath(__file__), "--child-shim", shim, "--iters", str(a.iters)],
                   check=True, env=env)


if __name__ == "__main__":
    main()
