"""torch 2.x in the root: crashes after a graph break (in Dynamo's resume
function, running an FX graph), in a backward pass run by the autograd
engine, and after the same ModuleList model was compiled again and again.
Each compiles with backend="eager": Dynamo, its resume functions, FX graph
code and the recompiles are the same as with Inductor, at a tenth of the time."""
import os

import pytest

import rootrun
from rootrun import python_frames, user_line

import fltest


# ---- after a graph break: the resume function, FX graph code, ATen

@pytest.fixture(scope="module")
def resume_run(tmp_path_factory):
    return rootrun.run_job("resume", tmp_path_factory.mktemp("resume"))


def test_resume_function_frames(resume_run):
    t = fltest.crashed_thread(resume_run.report)
    native = [f for f in t["frames"] if f["kind"] == "native"]
    assert native[0]["origin"] == "aten" and "libtorch_cpu" in native[0]["module"], native[0]
    assert any(f.get("symbol") == "dynamo_eval_custom_code" and f["origin"] == "dynamo" for f in native)
    py = python_frames(t)
    assert py[0]["origin"] == "fx" and py[0]["file"].startswith("<eval_with_key>."), py[0]
    assert py[0]["function"] == "forward"
    resume = [f for f in py if f["function"].startswith("torch_dynamo_resume_in_scaled_sum_at_")]
    assert resume and resume[0]["origin"] == "dynamo", py
    assert resume[0]["file"] == rootrun.JOBS and resume[0]["line"] == user_line("LAYER: resume")
    user = [f for f in py if f["function"] == "resume"]
    assert user and user[0]["origin"] == "python" and user[0]["line"] == user_line("USER: resume"), py
    # Order: FX graph, then the resume function, then the user's caller.
    assert py.index(resume[0]) < py.index(user[0])


def test_resume_diagnosis(resume_run):
    s = resume_run.report["diagnosis"]["summary"]
    assert "in libtorch (ATen) (libtorch_cpu.so" in s, s
    assert "under FX graph code forward at <eval_with_key>." in s, s
    assert f"while running torch_dynamo_resume_in_scaled_sum_at_{user_line('LAYER: resume')}" in s, s


def test_resume_compile_history(resume_run):
    crumbs = [b["message"] for b in resume_run.report["breadcrumbs"]]
    assert any(c.startswith("torch.compile: compiling scaled_sum (") for c in crumbs), crumbs
    assert any(c.startswith("torch.compile: compiling torch_dynamo_resume_in_scaled_sum_at_") for c in crumbs)


# ---- a backward pass: the autograd engine runs a custom Function's backward

@pytest.fixture(scope="module")
def backward_run(tmp_path_factory):
    return rootrun.run_job("backward", tmp_path_factory.mktemp("backward"))


def test_backward_engine_frames(backward_run):
    rep = backward_run.report
    t = fltest.crashed_thread(rep)
    native = [f for f in t["frames"] if f["kind"] == "native"]
    assert native[0]["origin"] == "aten", native[0]
    engine = [f for f in native if "torch8autograd6Engine" in (f.get("symbol") or "")]
    assert any("evaluate_function" in f["symbol"] for f in engine), [f.get("symbol") for f in native]
    # On a CPU-only graph the engine runs the backward on the thread that
    # called backward(): the engine's frames sit between the Function's
    # backward and the user's loss.backward().
    assert any("6Engine7execute" in (f.get("symbol") or "") for f in native)


def test_backward_python_frames(backward_run):
    t = fltest.crashed_thread(backward_run.report)
    py = python_frames(t)
    assert py[0]["function"] == "native_gradient_term" and py[0]["origin"] == "python", py[0]
    bw = [f for f in py if f["function"] == "backward" and f["file"] == rootrun.JOBS]
    assert [f["line"] for f in bw] == [user_line("LAYER: backward"), user_line("USER: backward")], py
    torch_autograd = [f for f in py if "/torch/autograd/" in f["file"]]
    assert torch_autograd and {f["origin"] for f in torch_autograd} == {"torch"}
    s = backward_run.report["diagnosis"]["summary"]
    assert "in libtorch (ATen)" in s and "while running native_gradient_term at jobs.py:" in s, s


@pytest.fixture(scope="module")
def compiled_autograd_run(tmp_path_factory):
    return rootrun.run_job("compiled_autograd", tmp_path_factory.mktemp("compiled_autograd"))


def test_compiled_autograd_layers_in_call_order(compiled_autograd_run):
    # Innermost first: the Inductor kernel of the compiled backward, its
    # output code, the compiled-autograd FX graph, compiled autograd's runtime
    # wrapper, the autograd engine that called it, the user's loss.backward().
    t = fltest.crashed_thread(compiled_autograd_run.report)
    frames = t["frames"]
    assert frames[0]["origin"] == "inductor" and frames[0]["kind"] == "native", frames[0]

    def first(pred, what):
        found = [i for i, f in enumerate(frames) if pred(f)]
        assert found, (what, [(f.get("origin"), f.get("symbol") or f.get("function")) for f in frames])
        return found[0], frames[found[0]]

    steps = [
        first(lambda f: f["kind"] == "python" and f["origin"] == "inductor" and f["function"] == "call", "output code"),
        first(lambda f: f["kind"] == "python" and f["file"].startswith("<eval_with_key>"), "FX graph"),
        first(lambda f: f["kind"] == "python" and f["file"].endswith("/torch/_dynamo/compiled_autograd.py"),
              "compiled autograd"),
        first(lambda f: "6Engine7execute" in (f.get("symbol") or ""), "engine"),
        first(lambda f: f["kind"] == "python" and f["file"] == rootrun.JOBS, "user"),
    ]
    order = [i for i, _ in steps]
    assert order == sorted(order), order
    (_, out), (_, fx), (_, ca), (_, engine), (_, user) = steps
    assert fx["origin"] == "fx" and ca["origin"] == "dynamo" and engine["origin"] == "aten", (fx, ca, engine)
    assert user["line"] == user_line("USER: compiled autograd"), user
    s = compiled_autograd_run.report["diagnosis"]["summary"]
    assert "Inductor-generated C++ kernel" in s and f"at jobs.py:{user_line('USER: compiled autograd')}" in s, s
    out = rootrun.cli("explain", rootrun.report_path(compiled_autograd_run))
    assert "Hint [torch.generated-code]" in out, out


# ---- the repeated-compile pattern: examples/torch-compile/modulelist_recompile.py

EXAMPLE = os.path.join(fltest.SOURCE, "examples", "torch-compile", "modulelist_recompile.py")


@pytest.fixture(scope="module")
def recompile_run(tmp_path_factory):
    # A fresh torch.compile of the nn.ModuleList model at every step, a new
    # shape each time (static shapes: each is a new compile, with Dynamo's
    # reason), then a crash in the same job.
    r = rootrun.run(["python3", EXAMPLE, "--steps", "5", "--backend", "eager", "--static", "--crash"],
                    tmp_path_factory.mktemp("recompile"))
    assert r.signal == 11, f"status {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def example_line(marker):
    with open(EXAMPLE) as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith("# " + marker))


def test_recompiles_recorded_with_reasons(recompile_run):
    rep = fltest.validate(recompile_run.report)
    crumbs = [b["message"] for b in rep["breadcrumbs"] if b["message"].startswith("torch.compile: ")]
    assert len(crumbs) == 5, crumbs
    assert all(c.startswith("torch.compile: compiling main.<locals>.Model.forward (" + EXAMPLE) for c in crumbs), crumbs
    assert crumbs[-1].split(" reason: ")[0].endswith("compiles=5"), crumbs[-1]
    # Dynamo's own recompile reason: the guard that failed.
    assert "reason: 0/0: tensor 'x' size mismatch at index 0. expected 1, actual 5" in crumbs[-1], crumbs[-1]
    assert rep["annotations"]["torch.compile.most_compiled"].startswith("main.<locals>.Model.forward (")
    assert rep["annotations"]["torch.compile.most_compiled"].endswith(" x5")


def test_explain_shows_repeated_compile_hint(recompile_run):
    out = rootrun.cli("explain", rootrun.report_path(recompile_run))
    assert "Hint [torch.repeated-compile]" in out, out
    assert "Model.forward" in out and "compiled 5 times" in out and "size mismatch at index 0" in out, out
    py = python_frames(fltest.crashed_thread(recompile_run.report))
    main = [f for f in py if f["function"] == "main" and f["file"] == EXAMPLE]
    assert main and main[0]["line"] == example_line("CRASH"), py
    s = recompile_run.report["diagnosis"]["summary"]
    assert "in libtorch (ATen)" in s and "while running forward at modulelist_recompile.py:" in s, s
