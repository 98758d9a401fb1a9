"""torch 2.x in the root: a fault inside an Inductor-generated C++ kernel
(an out-of-range gather with Inductor's bounds assert turned off), traced
from the kernel to the user's line."""
import json
import os

import pytest

import rootrun
from rootrun import python_frames, user_line

import fltest


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory):
    return rootrun.run_job("inductor_kernel", tmp_path_factory.mktemp("inductor"))


def test_kernel_frame_is_inductor(kernel_run):
    t = fltest.crashed_thread(kernel_run.report)
    native = [f for f in t["frames"] if f["kind"] == "native"]
    top = native[0]
    # The kernel runs in a module Inductor compiled into its cache.
    assert top["module"].startswith(rootrun.INDUCTOR_CACHE + "/"), top
    assert top["module"].endswith(".so") and top["origin"] == "inductor", top
    assert top.get("symbol") == "kernel", top
    assert any(f["origin"] == "cpython" for f in native)
    assert any(f["origin"] == "dynamo" for f in native), "Dynamo's frame-evaluation hook is on the stack"


def test_python_frames_lead_to_the_user_line(kernel_run):
    t = fltest.crashed_thread(kernel_run.report)
    py = python_frames(t)
    assert py, "the Python walker found no frames"
    # Innermost: Inductor's output code (the wrapper module in the cache), then
    # AOTAutograd's runtime wrappers, Dynamo's eval_frame, the model's forward.
    assert py[0]["origin"] == "inductor" and py[0]["file"].startswith(rootrun.INDUCTOR_CACHE), py[0]
    assert py[0]["function"] == "call"
    origins = [f["origin"] for f in py]
    assert "aot_autograd" in origins and "dynamo" in origins, origins
    fwd = [f for f in py if f["file"] == rootrun.JOBS and f["function"] == "forward"]
    assert fwd and fwd[0]["line"] == user_line("LAYER: inductor kernel"), py
    assert fwd[0]["origin"] == "python"
    caller = [f for f in py if f["file"] == rootrun.JOBS and f["function"] == "inductor_kernel"]
    assert caller and caller[0]["line"] == user_line("USER: inductor kernel"), py


def test_stack_is_interleaved_in_call_order(kernel_run):
    # Debian's 3.14 eval loop has no symbol; the merge still places each
    # Python run before the interpreter frame that ran it.
    t = fltest.crashed_thread(kernel_run.report)
    assert t.get("interleaved") is True, t.get("python_error")
    frames = t["frames"]

    def index(pred):
        return next(i for i, f in enumerate(frames) if pred(f))

    call = index(lambda f: f["kind"] == "python" and f["function"] == "call")
    forward = index(lambda f: f["kind"] == "python" and f["function"] == "forward" and f["file"] == rootrun.JOBS)
    hook = index(lambda f: f.get("symbol") == "dynamo_eval_custom_code")
    user = index(lambda f: f["kind"] == "python" and f["function"] == "inductor_kernel")
    assert frames[0]["origin"] == "inductor" and 0 < call < forward < hook < user, frames
    assert frames[call - 1]["kind"] == "native" and frames[-1]["kind"] == "native"


def test_diagnosis_names_kernel_and_user_frame(kernel_run):
    rep = kernel_run.report
    s = rep["diagnosis"]["summary"]
    assert s.startswith("SIGSEGV (address not mapped"), s
    assert "in an Inductor-generated C++ kernel (" in s and "!kernel)" in s, s
    assert "under Inductor output code call at " in s, s
    assert f"while running forward at jobs.py:{user_line('LAYER: inductor kernel')}" in s, s
    assert rep["diagnosis"]["category"] == "memory-access"


def test_versions_and_compile_history(kernel_run, root_versions):
    ann = kernel_run.report["annotations"]
    assert ann["torch.version"] == root_versions.split()[1], (ann, root_versions)
    assert ann["torch.cuda"] == "none"
    crumbs = [b["message"] for b in kernel_run.report["breadcrumbs"]]
    assert any(c.startswith("torch.compile: compiling Gather.forward (") for c in crumbs), crumbs


def test_explain_gives_the_generated_code_hint(kernel_run):
    out = rootrun.cli("explain", rootrun.report_path(kernel_run))
    assert "Hint [torch.generated-code]" in out, out


def test_symbolize_names_the_generated_source_line(kernel_run, tmp_path):
    # Inductor compiles its C++ with line tables and keeps the source beside
    # the module: the faulting frame gets the generated file and a line of
    # the gather (g++ folds the load of tmp6 = in_ptr1[...] into the multiply
    # that uses it, so the line is the load's or its use's).
    out = tmp_path / "sym.json"
    rootrun.cli("symbolize", rootrun.report_path(kernel_run), "-o", str(out))
    with open(out) as f:
        rep = json.load(f)
    top = fltest.crashed_thread(rep)["frames"][0]
    assert top["file"] == top["module"][: -len(".so")] + ".cpp", top
    with open(top["file"]) as f:
        line = f.read().splitlines()[top["line"] - 1]
    assert "tmp6" in line, line  # x[idx]: the value read far outside x
    # The module names its function `kernel`; the output code's call line
    # names the kernel. jobs.py compiles without comment_origin: no origins,
    # and the report says so.
    ik = top["inductor_kernel"]
    assert ik["name"] == "cpp_fused_index_mul_relu_0" and ik["source"] == top["file"], ik
    assert ik["call"].endswith(".py:" + str(python_frames_call_line(rep))), ik
    assert "comment_origin" in ik["origins_missing"] and "origins" not in ik, ik
    show = rootrun.cli("show", str(out))
    assert "Kernel:         in cpp_fused_index_mul_relu_0 (no source lines: compiled without " \
        "torch._inductor.config.comment_origin" in show, show


def python_frames_call_line(rep):
    """The line of the output code's frame (Runner.call) in the crashed thread."""
    t = fltest.crashed_thread(rep)
    return next(f["line"] for f in t["frames"] if f["kind"] == "python" and f["function"] == "call")


def test_symbolize_says_when_the_cache_is_gone(tmp_path):
    # test/data's report of the same crash: its Inductor cache was removed.
    data = os.path.join(fltest.SOURCE, "test", "data", "real-torch2-inductor-kernel.json")
    out = tmp_path / "sym.json"
    rootrun.cli("symbolize", data, "-o", str(out))
    with open(out) as f:
        rep = json.load(f)
    mod = [m for m in rep["modules"] if "/inductor-cache/" in m["path"]]
    assert len(mod) == 1 and "No such file or directory" in mod[0]["debug_error"], mod
    assert fltest.crashed_thread(rep)["frames"][0]["symbol"] == "kernel"  # the rest is kept
