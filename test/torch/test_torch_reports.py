"""PyTorch-aware reports: real crashes under the preload and what their
reports say about each frame's layer, the compile history and the hints.

- Debian's real PyTorch 1.13: an FX-traced ModuleList model crashing in ATen.
- A fake torch 2.x on disk (fakes.py): Dynamo/Inductor/FX/Triton file layout,
  resume functions, Inductor output code, and a C++ library whose symbols
  live in torch::dynamo and crash.
- The faultline Python package with and without the library loaded.
"""
import json
import os
import subprocess

import pytest

import fakes
import fltest

PYTHON = "/usr/bin/python3"
PKG = os.path.join(fltest.SOURCE, "python")
HINTS_TOOL = os.path.join(fltest.BUILD, "test", "torch", "torch_hints_tool")
FAKE_DYNAMO = os.path.join(fltest.PROGRAMS, "libfake_dynamo.so")


def has_real_torch():
    return subprocess.run([PYTHON, "-c", "import torch, numpy"], capture_output=True).returncode == 0


def python_frames(thread):
    return [f for f in thread["frames"] if f["kind"] == "python"]


def need_python_frames(thread):
    if not python_frames(thread):
        pytest.xfail("reports have no Python frames yet (the Python walker is not in this build)")


def hints_of(run):
    path = os.path.join(run.report_dir, "report.json")
    with open(path, "w") as f:
        json.dump(run.report, f)
    out = subprocess.run([HINTS_TOOL, path], capture_output=True, text=True, check=True).stdout
    return {h["id"]: h for h in json.loads(out)}


# ---- Debian's PyTorch 1.13: FX graph code calling a crashing ATen kernel

FX_JOB = r"""
import numpy as np
import faultline  # versions and compile history (PYTHONPATH has the package)
import torch
import torch.fx


class Block(torch.nn.Module):
    def forward(self, x):
        return x + 1


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.sum()


# 4 floats 2**40 bytes apart over a 16-byte buffer: the kernel reads unmapped memory.
bad = torch.from_numpy(np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (4,), (1 << 40,)))
gm = torch.fx.symbolic_trace(Model())
gm(bad)  # USER LINE
"""


@pytest.fixture(scope="module")
def fx_run(tmp_path_factory):
    if not has_real_torch():
        pytest.skip("python3-torch (Debian's PyTorch) is not installed for /usr/bin/python3")
    d = tmp_path_factory.mktemp("fx")
    job = d / "fx_job.py"
    job.write_text(FX_JOB)
    r = fltest.run([PYTHON, str(job)], env={"PYTHONPATH": PKG}, timeout=120)
    assert r.signal == 11, r.stderr
    return r


def test_fx_aten_frames_are_labelled(fx_run):
    rep = fltest.validate(fx_run.report)
    t = fltest.crashed_thread(rep)
    native = [f for f in t["frames"] if f["kind"] == "native"]
    # The innermost frames are ATen's (libtorch_cpu), named or not.
    assert native[0]["origin"] == "aten", native[0]
    aten_syms = [f["symbol"] for f in native if f["origin"] == "aten" and f.get("symbol")]
    assert any(s.startswith("_ZN2at") or s.startswith("_ZNK2at") for s in aten_syms), aten_syms
    assert all(f["origin"] == "aten" for f in native if "libtorch_cpu" in (f.get("module") or ""))
    assert any(f["origin"] == "cpython" for f in native)
    # Nothing in libtorch_python is mistaken for Dynamo (torch 1.13 has none).
    assert not any(f["origin"] == "dynamo" for f in t["frames"])


def test_fx_python_frames_are_labelled(fx_run):
    t = fltest.crashed_thread(fx_run.report)
    need_python_frames(t)
    py = python_frames(t)
    fx_graph = [f for f in py if f["file"].startswith("<eval_with_key>")]
    assert fx_graph and all(f["origin"] == "fx" for f in fx_graph), py
    assert fx_graph[0]["function"] == "forward"
    graph_module = [f for f in py if f["file"].endswith("torch/fx/graph_module.py")]
    assert graph_module and {f["origin"] for f in graph_module} == {"fx"}
    assert {f["origin"] for f in py if "/torch/nn/" in f["file"]} == {"torch"}
    user = [f for f in py if f["file"].endswith("fx_job.py")]
    assert user and user[0]["origin"] == "python"
    assert user[0]["line"] == FX_JOB.splitlines().index("gm(bad)  # USER LINE") + 1


def test_fx_diagnosis_names_graph_and_kernel(fx_run):
    rep = fx_run.report
    summary = rep["diagnosis"]["summary"]
    need_python_frames(fltest.crashed_thread(rep))
    assert "libtorch_cpu" in summary, summary
    assert "<eval_with_key>" in summary, summary
    # The hint for a kernel reading outside its tensor, with what matched.
    hints = hints_of(fx_run)
    assert "torch.aten-memory" in hints, hints
    assert any("aten" in e for e in hints["torch.aten-memory"]["evidence"])
    assert "torch.repeated-compile" not in hints


def test_versions_annotated_at_import(fx_run):
    ann = fx_run.report["annotations"]
    assert ann.get("torch.version", "").startswith("1.13"), ann
    assert ann.get("torch.cuda") == "none"


def test_fx_diagnosis_names_layer(fx_run):
    summary = fx_run.report["diagnosis"]["summary"]
    assert "ATen" in summary and "FX graph" in summary, summary
    # The user's own frame that led there is named too.
    assert " while running " in summary and ".py:" in summary.split(" while running ")[1], summary


# ---- A fake torch 2.x: Dynamo, Inductor, FX and Triton layouts

@pytest.fixture(scope="module", params=["callbacks", "compile-wrapper"])
def fake_run(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("fake-" + request.param)
    site = fakes.make_fake_torch(str(root), with_callbacks=request.param == "callbacks")
    launcher = fakes.make_job(str(root))
    env = {
        "PYTHONPATH": os.pathsep.join([site, PKG]),
        "FAKE_ROOT": str(root),
        "FAKE_DYNAMO_LIB": FAKE_DYNAMO,
        "FAKE_COMPILES": "6",
    }
    r = fltest.run([PYTHON, launcher], env=env, timeout=60)
    assert r.signal == 11, r.stderr
    return r


def test_fake_dynamo_native_frames(fake_run):
    rep = fltest.validate(fake_run.report)
    t = fltest.crashed_thread(rep)
    native = [f for f in t["frames"] if f["kind"] == "native"]
    top = native[0]
    assert "GuardManager" in top.get("symbol", ""), top
    assert top["origin"] == "dynamo"
    by_symbol = {f.get("symbol"): f["origin"] for f in native}
    assert by_symbol["_ZN5torch6dynamo22run_root_guard_managerEPKNS0_12_GLOBAL__N_112GuardManagerEi"] == "dynamo"
    assert by_symbol["fake_dynamo_check_guards"] == "native"
    assert "cpython" in by_symbol.values()


def test_fake_dynamo_python_frames(fake_run):
    t = fltest.crashed_thread(fake_run.report)
    need_python_frames(t)
    seen = {}
    for f in python_frames(t):
        name = os.path.basename(f["file"]) if not f["file"].startswith("<") else f["file"]
        seen.setdefault(name, f["origin"])
    for name, origin in fakes.EXPECTED_ORIGIN.items():
        assert seen.get(name) == origin, (name, seen)
    resume = [f for f in python_frames(t) if f["function"].startswith("torch_dynamo_resume_in_")]
    assert resume and resume[0]["origin"] == "dynamo"


def test_compile_history_in_breadcrumbs(fake_run):
    rep = fake_run.report
    crumbs = [b["message"] for b in rep["breadcrumbs"] if b["message"].startswith("torch.compile: ")]
    assert len(crumbs) == 6, rep["breadcrumbs"]
    assert crumbs[0].startswith("torch.compile: compiling forward (")
    assert "job.py:" in crumbs[0]
    assert "compile_id=0/0 compiles=1" in crumbs[0]
    assert "compile_id=0/5 compiles=6" in crumbs[5]
    assert "reason: tensor 'x' size mismatch at index 0. expected 5, actual 6" in crumbs[5]
    ann = rep["annotations"]
    assert ann["torch.version"] == "2.5.0+fake"
    assert ann["torch.compile.compiles"] == "6"
    assert ann["torch.compile.most_compiled"].endswith(" x6")


def test_repeated_compile_hint(fake_run):
    hints = hints_of(fake_run)
    assert "torch.repeated-compile" in hints, hints
    h = hints["torch.repeated-compile"]
    text = " ".join(h["advice"])
    for advice in ("dynamic=True", "cache_size_limit", "recompile_limit",
                   "accumulated_cache_size_limit", "del", "Upgrade PyTorch"):
        assert advice in text, advice
    assert any("forward" in e and "compiled 6 times" in e for e in h["evidence"]), h["evidence"]
    assert any("dynamo" in e and "GuardManager" in e for e in h["evidence"]), h["evidence"]
    assert "torch.dynamo-internal" in hints


def test_hint_needs_the_repetition(tmp_path):
    # One compile of forward and a crash elsewhere: no repeated-compile hint.
    report = {"breadcrumbs": [{"message": "torch.compile: compiling forward (/m.py:3) compile_id=0/0 compiles=1"}],
              "threads": [{"crashed": True, "frames": [{"kind": "native", "origin": "native", "module": "/lib/libc.so.6"}]}],
              "diagnosis": {"category": "null-deref"}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    out = subprocess.run([HINTS_TOOL, str(path)], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


# ---- The Python package on its own

def test_package_is_a_noop_without_the_library():
    code = ("import faultline; assert not faultline.available(); "
            "assert faultline.annotate('k', 'v') == 0; faultline.breadcrumb('x'); "
            "faultline.thread_annotate('k', 'v'); assert faultline.version() is None; print('ok')")
    r = fltest.run([PYTHON, "-c", code], preload=False, env={"PYTHONPATH": PKG})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_package_annotations_reach_the_report():
    code = ("import ctypes, faultline; assert faultline.available(); "
            "faultline.annotate('run', 'exp-42'); faultline.annotate('gone', 'x'); faultline.annotate('gone', None); "
            "faultline.thread_annotate('batch', '1337'); faultline.breadcrumb('epoch 3 ' + 'é' * 300); "
            "ctypes.string_at(0)")
    r = fltest.run([PYTHON, "-c", code], env={"PYTHONPATH": PKG})
    rep = r.report
    assert rep["annotations"]["run"] == "exp-42"
    assert "gone" not in rep["annotations"]
    assert fltest.crashed_thread(rep)["annotations"] == {"batch": "1337"}
    msg = rep["breadcrumbs"][-1]["message"]
    assert msg.startswith("epoch 3 é") and len(msg.encode()) <= 255
    msg.encode("utf-8")  # cut on a character boundary


def test_inductor_cache_dir_from_environment(tmp_path):
    cache = tmp_path / "my-inductor-cache"
    out = cache / "xy" / "cxyz.py"
    out.parent.mkdir(parents=True)
    out.write_text("import ctypes\ndef call():\n    ctypes.string_at(0)\ncall()\n")
    r = fltest.run([PYTHON, str(out)], env={"TORCHINDUCTOR_CACHE_DIR": str(cache)})
    t = fltest.crashed_thread(r.report)
    need_python_frames(t)
    assert {f["origin"] for f in python_frames(t) if f["file"] == str(out)} == {"inductor"}


def test_compile_example_explains_itself_without_torch_2():
    # Debian's torch 1.13 has no torch.compile: the example says so and exits 0.
    example = os.path.join(fltest.SOURCE, "examples", "torch-compile", "modulelist_recompile.py")
    r = subprocess.run([PYTHON, example, "--steps", "2"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=PKG))
    assert r.returncode == 0, r.stderr
    if has_real_torch():
        out = r.stdout
        if "needs >= 2.0" not in out:
            assert "steps finished" in out  # a machine with torch 2.x ran it
    else:
        assert "not installed" in r.stdout
