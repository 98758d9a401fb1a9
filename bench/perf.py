#!/usr/bin/env python3
"""One command for faultline's performance goals, each measured against its
baseline in the same run (medians). Not a test; nothing fails.

    python3 bench/perf.py [BUILD_DIR] [--runs N] [--quick] [--markdown]
                          [--skip p1|p2|p3|python|torch]

P1  capture: a process of N threads x ~50 frames crashes (SIGSEGV on its main
    thread); the time from the fault (the program's clock just before it) to
    the report's rename in the directory (seen by inotify: written and
    renamed; on a local filesystem the handler flushes it to the disk after
    the rename, so the time to the process's end is printed beside it),
    against `eu-stack -p` on the same program live, for 64 and 256 threads, with each unwinder (FAULTLINE_UNWINDER=cfi and libunwind);
    and the report's own faultline.capture_ns (from the handler's claim of
    the crash to the report's last field) with its phase breakdown
    (faultline.phases_ns); beside them the floor under the threads phase
    (`bench_threads N floor`: the same threads, each signalled once on a fresh
    signal stack of its own, a handler that does nothing). Then a two-thread
    Python job that crashes in native code (ctypes).
P2  start-up: `python3 -c pass`, `python3 -c "import torch"` and a C
    `int main(){}` with and without the preload, run by run interleaved (wall
    and CPU time), and the RSS the preload adds to an idle process.
P3  `faultline symbolize` against eu-addr2line and llvm-symbolizer-14 on the
    same addresses (bench/symbolize_bench.py).

--markdown prints the README's performance table from the same numbers.

A figure another benchmark also gives is measured by that benchmark's code,
imported: eu-stack's time and the RSS reading from bench/crash_capture.py,
start-up with and without the preload from bench/python_startup.py, the
symbolize rates by running bench/symbolize_bench.py. What only this script
gives (a crash timed from the fault to the report's rename, the signalling
floor, the Python jobs' crashes) is measured here.
"""
import argparse
import ctypes
import json
import os
import re
import select
import shutil
import signal
import struct
import statistics
import subprocess
import sys
import tempfile
import time

import crash_capture
import python_startup

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"


def lib(build):
    return os.path.join(build, "lib", "libfaultline.so")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


# ---- P1 ----------------------------------------------------------------------

class RenameWatch:
    """inotify on a directory: the CLOCK_MONOTONIC time a report (*.json)
    was renamed (or, where the filesystem has no RENAME_NOREPLACE, linked)
    into it, as this process saw it: the time includes this process's
    wake-up on a busy machine, so it errs long."""
    IN_CREATE = 0x100
    IN_MOVED_TO = 0x80

    def __init__(self, d):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if libc.inotify_add_watch(self.fd, d.encode(), self.IN_MOVED_TO | self.IN_CREATE) < 0:
            err = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(err, "inotify_add_watch")

    def wait(self, proc, timeout_s=30):
        """The time of the report's rename, read as it happens (not after the
        process ended); None once the process has ended without one."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if not select.select([self.fd], [], [], 0.05)[0]:
                if proc.poll() is not None and not select.select([self.fd], [], [], 0)[0]:
                    return None
                continue
            buf = os.read(self.fd, 65536)
            now = time.monotonic_ns()
            off = 0
            while off + 16 <= len(buf):
                _, _, _, ln = struct.unpack_from("iIII", buf, off)
                name = buf[off + 16:off + 16 + ln].rstrip(b"\0")
                off += 16 + ln
                if name.endswith(b".json") and not name.startswith(b"."):
                    return now
        return None

    def close(self):
        os.close(self.fd)


def fault_time(f):
    """The "fault NS" line a crashing program wrote to f (a file: a pipe's
    reader would wake up and compete with the capture for the CPUs)."""
    f.seek(0)
    for line in f.read().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == b"fault":
            return int(parts[1])
    return None


def crash_once(build, n, unwinder):
    """The report, the milliseconds from the fault to its rename, and from
    the fault to the process's end (after the rename the handler flushes
    the report to the disk, then the signal ends the process)."""
    d = tempfile.mkdtemp(prefix="fl-perf-")
    watch = None
    try:
        watch = RenameWatch(d)
        env = dict(os.environ, LD_PRELOAD=lib(build), FAULTLINE_DIR=d, FAULTLINE_STDERR="0",
                   FAULTLINE_UNWINDER=unwinder)
        with tempfile.TemporaryFile() as err:
            p = subprocess.Popen([os.path.join(build, "bench", "bench_threads"), str(n)], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
            assert p.stdout.readline() == b"ready\n"
            p.stdin.write(b"crash\n")
            p.stdin.flush()
            renamed_ns = watch.wait(p)
            p.wait()
            ended_ns = time.monotonic_ns()
            fault_ns = fault_time(err)
        reports = [f for f in os.listdir(d) if f.endswith(".json") and not f.startswith(".")]
        rep = None
        if reports:
            with open(os.path.join(d, reports[0])) as f:
                rep = json.load(f)
    finally:
        if watch:
            watch.close()
        shutil.rmtree(d, ignore_errors=True)
    total = (renamed_ns - fault_ns) / 1e6 if fault_ns and renamed_ns else None
    ended = (ended_ns - fault_ns) / 1e6 if fault_ns and renamed_ns else None
    return rep, total, ended


def eu_stack(build, n, runs):
    """Median seconds of `eu-stack -p` on the same program, live, without faultline."""
    p, d = crash_capture.start(build, n, preload=False)
    try:
        return crash_capture.eu_stack_time(p.pid, runs)
    finally:
        p.stdin.close()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def signal_floor(build, n, runs):
    """Median milliseconds from the first signal to the last answer of n
    threads on fresh signal stacks of their own, with a handler that does
    nothing (bench_threads N floor): what asking every thread costs at least."""
    ts = []
    for _ in range(runs):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        out = subprocess.run([os.path.join(build, "bench", "bench_threads"), str(n), "floor"],
                             capture_output=True, text=True, check=True, env=env).stdout
        ts.append(int(out.split()[1]) / 1e6)
    return med(ts)


def phases(rep):
    """Milliseconds per phase, and "write": the rest of the capture time
    (writing and renaming the report; threads_park is part of threads)."""
    ph = {k: v / 1e6 for k, v in rep["faultline"].get("phases_ns", {}).items()}
    ph["write"] = rep["faultline"]["capture_ns"] / 1e6 - sum(
        v for k, v in ph.items() if k != "threads_park")
    return ph


def p1(build, runs, results):
    print("P1  capture (median of %d): fault to report renamed (seen by inotify), and the "
          "report's capture_ns (claim to last field) with its phases" % runs)
    for n in (64, 256):
        eu = eu_stack(build, n, max(3, runs // 2))
        floor = signal_floor(build, n, runs)
        results[f"p1_{n}_floor"] = floor
        print(f"  {n:>4} threads signalled on their own fresh signal stacks, empty handler, first "
              f"signal to last answer (the floor under the threads phase): {floor:.2f} ms")
        for unwinder in ("cfi", "libunwind"):
            runs_ = [crash_once(build, n, unwinder) for _ in range(runs)]
            reps = [r for r, _, _ in runs_ if r]
            totals = [t for r, t, _ in runs_ if r and t is not None]
            total = med(totals)
            ended = med([e for r, _, e in runs_ if r and e is not None])
            cap = med([r["faultline"]["capture_ns"] / 1e6 for r in reps])
            frames = med([sum(len(t["frames"]) for t in r["threads"]) for r in reps])
            ph = {}
            for r in reps:
                for k, v in phases(r).items():
                    ph.setdefault(k, []).append(v)
            ph = {k: med(v) for k, v in ph.items()}
            results[f"p1_{n}_{unwinder}"] = total
            results[f"p1_{n}_{unwinder}_ended"] = ended
            results[f"p1_{n}_{unwinder}_capture"] = cap
            results[f"p1_{n}_{unwinder}_phases"] = ph
            results[f"p1_{n}_frames"] = frames
            print(f"  {n + 1:>4} threads, {frames:>6.0f} frames, {unwinder:>9}: {total:7.2f} ms to "
                  f"renamed (capture_ns {cap:.2f}; process ended {ended:.2f})   "
                  f"eu-stack -p {eu * 1e3:7.1f} ms   "
                  f"ratio {eu * 1e3 / total:5.1f}x")
            print("        phases (ms): " + "  ".join(f"{k} {v:.2f}" for k, v in ph.items()))
        results[f"p1_{n}_eu"] = eu * 1e3


PY_JOB = r"""
import ctypes, os, threading, time
ev = threading.Event()
def worker():
    ev.set()
    while True:
        time.sleep(0.01)
threading.Thread(target=worker, daemon=True).start()
ev.wait()
%s
def crash():
    os.write(2, b"fault %%d\n" %% time.monotonic_ns())
    ctypes.string_at(0)
crash()
"""


def python_job(build, runs, results, torch):
    code = PY_JOB % ("import torch" if torch else "")
    for unwinder in ("cfi", "libunwind"):
        caps, totals, ends, ph, sources = [], [], [], {}, []
        for _ in range(runs):
            d = tempfile.mkdtemp(prefix="fl-perf-")
            watch = RenameWatch(d)
            env = dict(os.environ, LD_PRELOAD=lib(build), FAULTLINE_DIR=d, FAULTLINE_STDERR="0",
                       FAULTLINE_UNWINDER=unwinder)
            with tempfile.TemporaryFile() as err:
                p = subprocess.Popen([PYTHON, "-c", code], env=env, stdout=subprocess.DEVNULL,
                                     stderr=err)
                renamed_ns = watch.wait(p)
                p.wait()
                ended_ns = time.monotonic_ns()
                fault_ns = fault_time(err)
            watch.close()
            if fault_ns and renamed_ns:
                totals.append((renamed_ns - fault_ns) / 1e6)
                ends.append((ended_ns - fault_ns) / 1e6)
            for f in os.listdir(d):
                if f.endswith(".json") and not f.startswith("."):
                    with open(os.path.join(d, f)) as fh:
                        rep = json.load(fh)
                    caps.append(rep["faultline"]["capture_ns"] / 1e6)
                    sources.append(rep["faultline"].get("modules_from", "?"))
                    for k, v in phases(rep).items():
                        ph.setdefault(k, []).append(v)
            shutil.rmtree(d, ignore_errors=True)
        name = "torch" if torch else "python"
        results[f"py_{name}_{unwinder}"] = med(totals)
        results[f"py_{name}_{unwinder}_ended"] = med(ends)
        results[f"py_{name}_{unwinder}_capture"] = med(caps)
        results[f"py_{name}_{unwinder}_phases"] = {k: med(v) for k, v in ph.items()}
        snap = sum(1 for x in sources if x.startswith("snapshot"))
        print(f"  two-thread Python job{' (import torch)' if torch else ''}, {unwinder:>9}: "
              f"{med(totals):6.2f} ms to renamed (capture_ns {med(caps):.2f}; process ended "
              f"{med(ends):.2f})   "
              f"modules from the snapshot in {snap}/{len(sources)}   "
              "phases (ms): " + "  ".join(f"{k} {med(v):.2f}" for k, v in ph.items()))


# ---- P2 ----------------------------------------------------------------------

def idle_rss_kib(cmd, env):
    """RSS of cmd once it has printed its first line (it then waits on stdin)."""
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    p.stdout.readline()
    rss = crash_capture.rss_kib(p.pid)
    p.stdin.close()
    p.wait()
    return rss


def p2(build, runs, results, torch):
    print(f"P2  start-up with the preload (median of {runs}, interleaved; ratio with / without)")
    empty = os.path.join(tempfile.mkdtemp(prefix="fl-perf-"), "empty")
    subprocess.run(["cc", "-O2", "-x", "c", "-", "-o", empty], input=b"int main(){return 0;}",
                   check=True)
    cases = [("C int main(){}", [empty]), ("python3 -c pass", [PYTHON, "-c", "pass"])]
    if torch:
        cases.append(("python3 -c 'import torch'", [PYTHON, "-c", "import torch"]))
    for name, argv in cases:
        (aw, ac), (bw, bc) = python_startup.startup_pair(argv, lib(build),
                                                          runs if "torch" not in name else max(5, runs // 4))
        results[f"p2_{name}"] = ((aw, ac), (bw, bc))
        print(f"  {name:28s} wall {aw * 1e3:8.2f} -> {bw * 1e3:8.2f} ms (x{bw / aw:.3f})   "
              f"CPU {ac * 1e3:8.2f} -> {bc * 1e3:8.2f} ms (x{bc / ac:.3f})")
    idle = [PYTHON, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"]
    base = dict(os.environ)
    base.pop("LD_PRELOAD", None)
    r0 = med([idle_rss_kib(idle, base) for _ in range(5)])
    r1 = med([idle_rss_kib(idle, dict(base, LD_PRELOAD=lib(build))) for _ in range(5)])
    results["p2_rss"] = r1 - r0
    print(f"  RSS added to an idle python3: {r1 - r0:.0f} KiB (one thread; each further thread "
          f"adds its alternate signal stack's touched pages)")


# ---- P3 ----------------------------------------------------------------------

def p3(build, runs, results):
    print("P3  symbolize (bench/symbolize_bench.py)")
    out = subprocess.run([sys.executable, os.path.join(HERE, "symbolize_bench.py"), "--faultline",
                          os.path.join(build, "bin", "faultline"), "--runs", str(max(3, runs // 4)),
                          "--skip", "addr2line"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        print("  " + line.strip())
        m = re.match(r"\s*vs (\S+)\s+cold x([\d.]+)\s+warm x([\d.]+)", line)
        if m:
            results[f"p3_{m.group(1)}"] = (float(m.group(2)), float(m.group(3)))


def brief(ph, keys=("threads", "modules", "symbols", "write")):
    return ", ".join(f"{k} {ph[k]:.2f}" for k in keys if k in ph)


def markdown(r):
    rows = ["| what | result | baseline (same run) |", "| --- | --- | --- |"]
    for n in (64, 256):
        if f"p1_{n}_cfi" in r:
            eu = r[f"p1_{n}_eu"]
            rows.append(f"| crash capture, {n + 1} threads x ~50 frames "
                        f"({r[f'p1_{n}_frames']:,.0f} frames), fault to report renamed "
                        f"| {r[f'p1_{n}_cfi']:.1f} ms (capture_ns {r[f'p1_{n}_cfi_capture']:.1f}; "
                        f"process ended {r[f'p1_{n}_cfi_ended']:.1f}; "
                        f"ms: {brief(r[f'p1_{n}_cfi_phases'])}); "
                        f"libunwind {r[f'p1_{n}_libunwind']:.1f} ms "
                        f"| `eu-stack -p`: {eu:.0f} ms ({eu / r[f'p1_{n}_cfi']:.0f}x); "
                        f"signalling every thread, empty handler: {r[f'p1_{n}_floor']:.1f} ms |")
    for k, label in (("py_python_cfi", "two-thread Python job crashing in ctypes"),
                     ("py_torch_cfi", "the same job after `import torch`")):
        if k in r:
            rows.append(f"| {label}, fault to report renamed | {r[k]:.1f} ms "
                        f"(capture_ns {r[k + '_capture']:.1f}; process ended "
                        f"{r[k + '_ended']:.1f}; ms: {brief(r[k + '_phases'])}); "
                        f"libunwind {r[k.replace('cfi', 'libunwind')]:.1f} ms | |")
    for k, v in r.items():
        if k.startswith("p2_") and isinstance(v, tuple):
            (aw, ac), (bw, bc) = v
            rows.append(f"| start-up, {k[3:]} | CPU {bc * 1e3:.1f} ms (x{bc / ac:.2f}), "
                        f"wall {bw * 1e3:.1f} ms (x{bw / aw:.2f}) "
                        f"| CPU {ac * 1e3:.1f} ms, wall {aw * 1e3:.1f} ms without the preload |")
    if "p2_rss" in r:
        rows.append(f"| RSS added (idle python3) | {r['p2_rss']:.0f} KiB | |")
    for k, v in r.items():
        if k.startswith("p3_"):
            rows.append(f"| `faultline symbolize` vs {k[3:]} | x{v[0]:.2f} cold, x{v[1]:.2f} warm "
                        f"| same 10,000 addresses |")
    print("\n".join(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--skip", action="append", default=[])
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    has_torch = "torch" not in a.skip and subprocess.run(
        [PYTHON, "-c", "import torch"], capture_output=True).returncode == 0
    r = {}
    if "p1" not in a.skip:
        p1(build, a.runs, r)
        if "python" not in a.skip:
            python_job(build, a.runs, r, False)
            if has_torch:
                python_job(build, max(3, a.runs // 2), r, True)
    if "p2" not in a.skip:
        p2(build, max(40, a.runs * 5), r, has_torch)
    if "p3" not in a.skip:
        p3(build, a.runs, r)
    if a.markdown:
        markdown(r)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main())
