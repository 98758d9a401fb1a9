#!/usr/bin/env python3
"""Benchmark (not a test): the start-up cost of the Python package.
`python3 -c pass` against, in the same run and interleaved:

  import      python3 -c "import faultline"          (no library: does nothing)
  enable      python3 -c "import faultline; faultline.enable()"   (loads the library late)
  preload     LD_PRELOAD=libfaultline.so python3 -c pass
  preload+enable  both (enable() reinstalls the preloaded library)
  hook        python3 -c pass with the start-up hook installed as the wheel
              installs it (faultline-boot.pth in a user site-packages)
  preload+hook    both: the hook watches for torch, which `pass` never imports

    python3 bench/python_startup.py [BUILD_DIR] [--runs 31] [--python /usr/bin/python3]

Medians of wall time per start, and the ratio to the bare interpreter.
A late load that the library does not support yet is reported as failing.

startup_pair() is the one measurement of a program's start-up with and
without the preload: bench/perf.py and bench/crash_capture.py call it.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_timed(argv, env):
    """(wall seconds, CPU seconds: user + system, exit status) of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def startup_pair(argv, lib, runs):
    """Medians (wall, CPU) of argv without and with lib preloaded, the two
    interleaved run by run so that the machine's load hits both alike. On a
    shared, loaded machine the CPU time is the steadier measure."""
    base = dict(os.environ)
    base.pop("LD_PRELOAD", None)
    with_fl = dict(base, LD_PRELOAD=lib)
    for _ in range(3):  # warm the page cache
        run_timed(argv, base)
        run_timed(argv, with_fl)
    a, b = [], []
    for _ in range(runs):
        a.append(run_timed(argv, base))
        b.append(run_timed(argv, with_fl))
    med = statistics.median
    return ((med([x[0] for x in a]), med([x[1] for x in a])),
            (med([x[0] for x in b]), med([x[1] for x in b])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--runs", type=int, default=31)
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    lib = os.path.join(os.path.abspath(a.build), "lib", "libfaultline.so")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    base_env.pop("LD_PRELOAD", None)
    base_env["PYTHONPATH"] = os.path.join(HERE, "..", "python")
    base_env["FAULTLINE_LIB"] = lib
    # Every case has a user site-packages (PYTHONUSERBASE); the hook cases'
    # holds _faultline_boot.py and faultline-boot.pth.
    minor = subprocess.run([a.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    bases = tempfile.mkdtemp(prefix="faultline-bench-")
    for kind in ("empty", "hook"):
        os.makedirs(os.path.join(bases, kind, "lib", "python" + minor, "site-packages"))
    site = os.path.join(bases, "hook", "lib", "python" + minor, "site-packages")
    for f in ("_faultline_boot.py", "faultline-boot.pth"):
        shutil.copy(os.path.join(HERE, "..", "python", f), site)
    # As pip installs it: compiled to .pyc.
    subprocess.run([a.python, "-m", "py_compile", os.path.join(site, "_faultline_boot.py")], check=True)
    base_env["PYTHONUSERBASE"] = os.path.join(bases, "empty")
    hook_env = dict(base_env, PYTHONUSERBASE=os.path.join(bases, "hook"))
    pre = dict(base_env, LD_PRELOAD=lib)
    cases = [
        ("bare", ["-c", "pass"], base_env),
        ("import", ["-c", "import faultline"], base_env),
        ("enable", ["-c", "import faultline; faultline.enable()"], base_env),
        ("preload", ["-c", "pass"], pre),
        ("preload+enable", ["-c", "import faultline; faultline.enable()"], pre),
        ("hook", ["-c", "pass"], hook_env),
        ("preload+hook", ["-c", "pass"], dict(hook_env, LD_PRELOAD=lib)),
    ]
    times = {name: [] for name, _, _ in cases}
    failed = set()
    for _ in range(a.runs):
        for name, args, env in cases:  # interleaved: drift hits all alike
            dt, _, status = run_timed([a.python, *args], env)
            if status != 0:
                failed.add(name)
            times[name].append(dt)
    base = statistics.median(times["bare"])
    print(f"{a.python}, {a.runs} runs each, medians")
    for name, _, _ in cases:
        m = statistics.median(times[name])
        note = "  (FAILED: " + "library cannot be loaded late" * (name == "enable") + ")" \
            if name in failed else ""
        print(f"  {name:<16} {m * 1e3:7.1f} ms  ratio {m / base:5.2f}  (+{(m - base) * 1e3:.1f} ms){note}")
    pre_m = statistics.median(times["preload"])
    hook_m = statistics.median(times["preload+hook"])
    print(f"  the hook under the preload: ratio {hook_m / pre_m:.3f} to preload alone")
    shutil.rmtree(bases, ignore_errors=True)


if __name__ == "__main__":
    main()
