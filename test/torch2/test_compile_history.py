"""Compile history with no change to the job: the package installed as a
user installs it (here into a user site-packages, PYTHONUSERBASE: the
faultline package, _faultline_boot.py and faultline-boot.pth, as the wheel
lays them out) and the library only preloaded. The job never imports
faultline; its report still has Dynamo's compilations as breadcrumbs and
torch's version. A job that never imports torch imports neither torch nor
faultline."""
import os
import re
import shutil

import rootrun

import fltest

JOB = """
import ctypes, sys
import torch
print(f"torch {torch.__version__} python {sys.version.split()[0]}", flush=True)

@torch.compile(backend="eager", dynamic=False)
def scale(x):
    return x * 2

for n in (2, 3, 4):
    scale(torch.ones(n))  # one compilation per shape
print("faultline imported:", "faultline" in sys.modules, flush=True)
ctypes.string_at(0)
"""


def user_site(tmp_path):
    """A user site-packages with the package as the wheel installs it."""
    py = re.search(r"python (\d+\.\d+)", rootrun.versions()).group(1)
    base = tmp_path / "userbase"
    site = base / "lib" / f"python{py}" / "site-packages"
    site.mkdir(parents=True)
    shutil.copytree(os.path.join(rootrun.PKG, "faultline"), site / "faultline",
                    ignore=shutil.ignore_patterns("__pycache__", "_bundle"))
    for f in ("_faultline_boot.py", "faultline-boot.pth"):
        shutil.copy(os.path.join(rootrun.PKG, f), site / f)
    return str(base)


def test_compile_breadcrumbs_without_import_faultline(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    env = {"PYTHONUSERBASE": user_site(tmp_path), "PYTHONPATH": ""}
    r = rootrun.run(["python3", str(tmp_path / "job.py")], tmp_path, env=env)
    assert r.signal == 11, (r.returncode, r.stdout, r.stderr)
    assert "faultline imported: True" in r.stdout, r.stdout
    rep = fltest.validate(r.report)
    crumbs = [b["message"] for b in rep["breadcrumbs"] if b["message"].startswith("torch.compile: compiling scale")]
    assert len(crumbs) == 3 and "compiles=3" in crumbs[-1], rep["breadcrumbs"]
    annotations = rep.get("annotations") or {}
    assert annotations.get("torch.version", "").startswith("2."), annotations


def test_a_job_without_torch_imports_neither(tmp_path):
    env = {"PYTHONUSERBASE": user_site(tmp_path), "PYTHONPATH": ""}
    code = "import sys; print(sorted(m for m in ('torch', 'faultline', '_faultline_boot') if m in sys.modules))"
    r = rootrun.run(["python3", "-c", code], tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    # The hook ran (its module is there) and imported nothing.
    assert r.stdout.strip().splitlines()[-1] == "['_faultline_boot']", r.stdout
    # Without the preload it does not even install its finder.
    r = rootrun.run(["python3", "-c", "import sys, _faultline_boot as b; "
                     "print(any(isinstance(f, b._OnTorchImport) for f in sys.meta_path))"],
                    tmp_path, env=env, preload=False)
    assert r.stdout.strip().splitlines()[-1] == "False", r.stdout + r.stderr
