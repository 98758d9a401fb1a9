"""libfaultline.so loaded late — by faultline.enable() through ctypes, after
the interpreter started (and after numpy and torch loaded their libraries,
where torch exists) — in every interpreter here: Debian's 3.11, pyenv's
3.9-3.13 and the Debian sid root's 3.14. Each crash's report must equal the
preloaded run's (the crashing thread's Python frames and innermost native
frame), and its Python frames must equal CPython's faulthandler's, enabled
in the same process."""
import json
import os
import signal
import subprocess

import pytest

import fltest
import pyenvs
from pkgtest import PYTHONPATH, faulthandler_current, python_frames

SID_ROOT = os.environ.get("FAULTLINE_TORCH_ROOT", "/var/cache/faultline/sid-root")
# Where torch is installed; "compile": torch 2.x, whose Dynamo runs too.
WITH_TORCH = {"debian-3.11": True, "sid-3.14": "compile"}

CRASH = """
import ctypes, sys
if "--torch" in sys.argv:
    import numpy, torch
import faultline
faultline.enable(report_dir=sys.argv[1])
if "--compile" in sys.argv:
    def double(x):
        return x * 2
    torch.compile(double, backend="eager")(torch.ones(2))
def kernel():
    return ctypes.c_int64.from_address(8).value
def step():
    return kernel()
step()
"""


def interpreters():
    out = [pytest.param(p, id=i) for i, p in pyenvs.interpreters()]
    out.append(pytest.param("sid", id="sid-3.14"))
    return out


def run(python, tmp_path, preload, torch):
    """Runs the crash; the late run with faulthandler enabled too (before
    faultline, which then hands the signal on to it). Returns (run, report)."""
    reports = tmp_path / ("pre" if preload else "late")
    reports.mkdir()
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    args = ([] if preload else ["-X", "faulthandler"]) + [str(script), str(reports)]
    args += ["--torch"] if torch else []
    args += ["--compile"] if torch == "compile" else []
    env = {"PYTHONPATH": PYTHONPATH, "FAULTLINE_LIB": fltest.LIB, "FAULTLINE_STDERR": "0"}
    if python != "sid":
        r = fltest.run([python, *args], preload=preload, env=env, report_dir=str(reports),
                       timeout=300)
    else:
        r = run_in_sid(args, env, preload, tmp_path, reports)
    assert r.returncode == -signal.SIGSEGV, r.stderr
    (path,) = reports.glob("faultline-*.json")
    return r, fltest.validate(json.loads(path.read_text()))


def run_in_sid(args, env, preload, tmp_path, reports):
    """The sid root's python3, through tools/torch-root (a private mount
    namespace; the checkout and the build bound read-only at their own paths,
    the test's folder writable)."""
    if not os.path.exists(os.path.join(SID_ROOT, ".faultline-root-complete")):
        if os.environ.get("FAULTLINE_PY_ALLOW_MISSING") == "1":
            pytest.skip(f"no sid root at {SID_ROOT}")
        pytest.fail(f"no sid root at {SID_ROOT}: tools/torch-root make (FAULTLINE_PY_ALLOW_MISSING=1 skips)")
    inner = {**env, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    if preload:
        inner["LD_PRELOAD"] = fltest.LIB
    cmd = [os.path.join(fltest.SOURCE, "tools", "torch-root"), "run", "--bind", fltest.BUILD,
           "--rw", str(tmp_path), "--cd", str(tmp_path), "--", "env", "-i"]
    cmd += [f"{k}={v}" for k, v in inner.items()] + ["/usr/bin/python3", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return fltest.Run(p.returncode, p.stdout, p.stderr, [], str(reports))


def innermost_native(thread):
    f = next(f for f in thread["frames"] if f["kind"] == "native")
    return os.path.basename(f.get("module", "")), f.get("symbol"), f.get("module_offset")


@pytest.mark.parametrize("python", interpreters())
def test_late_load_reports_like_preload(python, tmp_path, request):
    if python != "sid":
        pyenvs.require(python)
    torch = WITH_TORCH.get(request.node.callspec.id, False)
    late_run, late = run(python, tmp_path, preload=False, torch=torch)
    _, pre = run(python, tmp_path, preload=True, torch=torch)
    lt, pt = fltest.crashed_thread(late), fltest.crashed_thread(pre)
    # The Python frames are faulthandler's, in the same process.
    assert python_frames(lt) == faulthandler_current(late_run.stderr)
    assert [f[2] for f in python_frames(lt)][:3] == ["kernel", "step", "<module>"]
    # And the same as a preloaded run's.
    assert python_frames(lt) == python_frames(pt)
    assert innermost_native(lt) == innermost_native(pt)
    assert lt["interleaved"] == pt["interleaved"]
    assert late["threads_total"] == pre["threads_total"]
    assert late["python"]["version"] == pre["python"]["version"]
    if torch:
        assert late["annotations"]["torch.version"] == pre["annotations"]["torch.version"]
    if torch == "compile":
        # Dynamo's compilation, recorded by the hooks enable() installed.
        crumbs = [b["message"] for b in late["breadcrumbs"]]
        assert any(c.startswith("torch.compile: compiling double (") for c in crumbs), crumbs
