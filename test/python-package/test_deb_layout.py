"""The Python package as the .deb installs it (cmake/Packaging.cmake:
`cmake --install` lays out the same files the package holds): the faultline
package, _faultline_boot.py and faultline-boot.pth in lib/python3/dist-packages.
Debian's python3 reads that folder at /usr only, so the jobs here see it
through a user site-packages that is a link to it (the .pth is read at
start-up either way). A preloaded job that never imports faultline and was
never pip-installed: the start-up hook keeps the crash text single under -X
faulthandler (host 3.11), and records torch.compile history (the sid root's
3.14 with torch 2.x)."""
import os
import re
import subprocess
import sys

import pytest

import fltest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch2"))
import rootrun  # noqa: E402

SID_ROOT = os.environ.get("FAULTLINE_TORCH_ROOT", "/var/cache/faultline/sid-root")


def install(tmp_path):
    prefix = tmp_path / "inst" / "usr"
    p = subprocess.run(["cmake", "--install", fltest.BUILD, "--prefix", str(prefix)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    dist = prefix / "lib" / "python3" / "dist-packages"
    for f in ("faultline/__init__.py", "_faultline_boot.py", "faultline-boot.pth"):
        assert (dist / f).is_file(), f
    return prefix, dist


def user_base(tmp_path, dist, minor):
    """HOME/.local whose site-packages for python3.<minor> is the dist-packages."""
    site = tmp_path / "home" / ".local" / "lib" / f"python3.{minor}"
    site.mkdir(parents=True)
    (site / "site-packages").symlink_to(dist)
    return str(tmp_path / "home" / ".local")


def test_installed_hook_keeps_the_text_single_under_x_faulthandler(tmp_path):
    prefix, dist = install(tmp_path)
    base = user_base(tmp_path, dist, 11)
    job = "import ctypes\ndef f():\n    ctypes.string_at(0)\nf()\n"
    r = fltest.run(["/usr/bin/python3.11", "-X", "faulthandler", "-c", job],
                   env={"PYTHONUSERBASE": base, "PYTHONPATH": "",
                        "LD_PRELOAD": str(prefix / "lib" / "libfaultline.so")})
    assert r.returncode == -11, r.stderr
    assert r.stderr.count("Fatal Python error: Segmentation fault") == 1, r.stderr
    assert "Current thread's C stack trace" in r.stderr and "report written" in r.stderr
    assert fltest.validate(r.report)["annotations"]["faultline.faulthandler"] == "on"


JOB = """
import ctypes, sys
import torch

@torch.compile(backend="eager", dynamic=False)
def scale(x):
    return x * 2

for n in (2, 3):
    scale(torch.ones(n))
print("faultline from", sys.modules["faultline"].__file__, flush=True)
ctypes.string_at(0)
"""


def test_preloaded_torch2_job_records_compiles_from_the_installed_package(tmp_path):
    if not os.path.exists(os.path.join(SID_ROOT, ".faultline-root-complete")):
        pytest.skip(f"no sid root at {SID_ROOT} (tools/torch-root make)")
    prefix, dist = install(tmp_path)
    minor = re.search(r"python 3\.(\d+)", rootrun.versions()).group(1)
    base = user_base(tmp_path, dist, minor)
    (tmp_path / "job.py").write_text(JOB)
    r = rootrun.run(["python3", str(tmp_path / "job.py")], tmp_path,
                    env={"PYTHONUSERBASE": base, "PYTHONPATH": "",
                         "LD_PRELOAD": str(prefix / "lib" / "libfaultline.so")})
    assert r.signal == 11, (r.returncode, r.stdout, r.stderr)
    assert "faultline from " + base in r.stdout, r.stdout  # the installed copy
    rep = fltest.validate(r.report)
    crumbs = [b["message"] for b in rep["breadcrumbs"]
              if b["message"].startswith("torch.compile: compiling scale")]
    assert len(crumbs) == 2, rep["breadcrumbs"]
