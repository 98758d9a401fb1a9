"""Running jobs with torch 2.x inside the root made by tools/torch-root, under
this build's preloaded library, and collecting their reports (as
test/lib/fltest.py does on the host).

The job's directory is bound at the same path inside the root, so report
paths, Inductor cache paths and file names in the report are the host's: the
host's `faultline` CLI reads the report and the generated files directly.
"""
import glob
import json
import os
import socket
import subprocess

import fltest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(fltest.SOURCE, "tools", "torch-root")
PKG = os.path.join(fltest.SOURCE, "python")
JOBS = os.path.join(HERE, "jobs.py")
# One Inductor cache for every torch2 test of this build: a kernel compiled
# once is loaded from there afterwards (the crash is the same either way).
INDUCTOR_CACHE = os.path.join(fltest.BUILD, "torch2-inductor-cache")


def versions():
    """'torch X python Y' of the root (printed in every test's output)."""
    r = subprocess.run([TOOL, "versions"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, "the torch 2.x root does not work:\n" + r.stderr
    return r.stdout.strip()


def run(args, workdir, env=None, timeout=300, preload=True):
    """Runs args (a list; a relative first element is found on the root's
    PATH) in the root with workdir as the working directory and report
    directory; returns an fltest.Run with the reports found there."""
    workdir = str(workdir)
    os.makedirs(INDUCTOR_CACHE, exist_ok=True)
    e = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "LANG": "C.UTF-8",
        "PYTHONPATH": PKG,
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "TORCHINDUCTOR_CACHE_DIR": INDUCTOR_CACHE,
        "FAULTLINE_DIR": workdir,
    }
    if preload:
        e["LD_PRELOAD"] = fltest.LIB
    if env:
        e.update(env)
    cmd = [TOOL, "run", "--bind", fltest.BUILD, "--rw", workdir, "--rw", INDUCTOR_CACHE, "--cd", workdir,
           "--", "env", "-i"] + [f"{k}={v}" for k, v in e.items()] + list(args)
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    reports = []
    for path in sorted(glob.glob(os.path.join(workdir, "faultline-*.json"))):
        with open(path, "rb") as f:
            reports.append(json.loads(f.read().decode("utf-8")))
    r = fltest.Run(p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"),
                   reports, workdir)
    # The versions the job ran with, in the test's output.
    first = r.stdout.splitlines()[:1]
    print(f"[{' '.join(args[-2:])}] {first[0] if first else '(no output)'}")
    return r


def run_job(scenario, workdir, env=None, timeout=300):
    """jobs.py SCENARIO, which must die of SIGSEGV and leave one report."""
    r = run(["python3", JOBS, scenario], workdir, env=env, timeout=timeout)
    assert r.signal == 11, f"{scenario}: status {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert len(r.reports) == 1, r.stderr
    fltest.validate(r.report)
    return r


def user_line(marker, path=JOBS):
    """Line number of the line of path (jobs.py) that carries `# USER: marker` (or LAYER)."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n
    raise AssertionError("no line marked " + marker)


TORCHRUN = os.path.join(HERE, "torchrun_nolibuv.py")


def torchrun_args(job, nproc=4):
    """torchrun (torchrun_nolibuv.py) of job with nproc ranks on a fixed free
    port: with --master_port 0 the ranks' own store clients would be told 0."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return ["python3", TORCHRUN, f"--nproc_per_node={nproc}", "--master_port", str(port), job]


def torchrun_job(job, tmp_path):
    """Runs job under torchrun twice: without faultline (tmp_path/without)
    and preloaded with its default settings (tmp_path/with: shutdown reports
    are on under torchrun). Returns (the run with faultline, the one
    without)."""
    base_dir = tmp_path / "without"
    base_dir.mkdir()
    baseline = run(torchrun_args(job), base_dir, preload=False, timeout=300)
    work = tmp_path / "with"
    work.mkdir()
    r = run(torchrun_args(job), work, timeout=300)
    return r, baseline


def report_path(run):
    """The path of the one report a run left."""
    return [os.path.join(run.report_dir, p) for p in os.listdir(run.report_dir) if p.startswith("faultline-")][0]


def python_frames(thread):
    return [f for f in thread["frames"] if f["kind"] == "python"]


def cli(*args, cwd=None):
    r = subprocess.run([fltest.CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout
