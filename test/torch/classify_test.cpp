// The frame-origin table, rule by rule: each case is a frame as a report
// would carry it (module path and mangled symbol, or co_filename and
// co_name) and the rule that must claim it. The last test fails when a rule
// of the table has no case here.
#include "core/diagnosis/classify.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

#include "core/diagnosis/signature.h"

using namespace faultline::core;

namespace {

struct Case {
  const char* rule;  // expected rule name, or nullptr for the default
  const char* where;
  const char* what;
  const char* origin;
};

constexpr const char* kTp = "/usr/lib/python3/dist-packages/torch/lib/libtorch_python.so";

const Case kNativeCases[] = {
    // Triton kernels (names Inductor gives them) and launchers.
    {"triton.kernel.pointwise", "/tmp/x.so", "triton_poi_fused_add_0", "triton"},
    {"triton.kernel.reduction", nullptr, "triton_red_fused_sum_1", "triton"},
    {"triton.kernel.persistent", "/tmp/x.so", "triton_per_fused_native_layer_norm_2", "triton"},
    {"triton.kernel.template", "/tmp/x.so", "triton_tem_fused_mm_3", "triton"},
    {"triton.kernel.other", "/tmp/x.so", "triton__0d1d2de", "triton"},
    {"triton.cache.module", "/root/.triton/cache/4fa1c2/cuda_utils.so", "launch", "triton"},
    {"triton.cache.module", "/tmp/torchinductor_alice/triton/0/AB12/__triton_launcher.so",
     "_launch", "triton"},
    {"triton.launcher.module", "/elsewhere/__triton_launcher.cpython-311-x86_64-linux-gnu.so",
     "_launch", "triton"},
    {"triton.libtriton", "/opt/venv/lib/python3.11/site-packages/triton/_C/libtriton.so",
     "_ZN4mlir6detail3fooEv", "triton"},
    // Inductor's C++ kernels.
    {"inductor.kernel.cpp_fused", "/anywhere/k.so", "cpp_fused_add_mul_0", "inductor"},
    {"inductor.cache.module", "/tmp/torchinductor_alice/qz/cqzabcdef.so", "kernel", "inductor"},
    // AOTInductor: the generated runtime in the package's library, libtorch's runner.
    {"aoti.runtime.namespace", "/tmp/aotinductor_Zsf3yT/m/data/aotinductor/model/cfw.wrapper.so",
     "_ZN5torch12aot_inductor16AOTInductorModel8run_implEPP16AtenTensorOpaqueS4_PvP23"
     "AOTIProxyExecutorOpaque",
     "inductor"},
    {"aoti.runtime.c_api", "/srv/model.so", "AOTInductorModelContainerRun", "inductor"},
    {"aoti.package.module", "/tmp/aotinductor_Zsf3yT/m/data/aotinductor/model/cfw.wrapper.so",
     nullptr, "inductor"},
    {"aoti.runner.package_loader", "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.2.14",
     "_ZN5torch8inductor22AOTIModelPackageLoader3runERKSt6vectorIN2at6TensorESaIS4_EEPv", "torch"},
    {"aoti.runner.container", "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.2.14",
     "_ZN5torch8inductor24AOTIModelContainerRunner3runERKSt6vectorIN2at6TensorESaIS4_EEPv",
     "torch"},
    // A function of the program taking the loader is not the loader.
    {nullptr, "/srv/server",
     "_ZN12_GLOBAL__N_1L5serveERN5torch8inductor22AOTIModelPackageLoaderERKN2at6TensorExx",
     "native"},
    // Dynamo's C/C++.
    {"dynamo.guards.namespace", kTp,
     "_ZN5torch6dynamo12_GLOBAL__N_116RootGuardManager11check_nopybindEP7_object", "dynamo"},
    {"dynamo.guards.namespace", "/x/ext.so", "_ZNK5torch6dynamo9LeafGuard5checkEP7_object",
     "dynamo"},
    {"dynamo.guards.tensor_guards", kTp,
     "_ZN12_GLOBAL__N_118TensorGuards_checkEPNS_12TensorGuardsEP7_objectS3_", "dynamo"},
    {"dynamo.guards.tensor_check", kTp,
     "_ZN12_GLOBAL__N_111TensorCheck5checkERKNS_10LocalStateERKN2at6TensorE", "dynamo"},
    {"dynamo.cache.c", kTp, "lookup", "dynamo"},
    {"dynamo.cache.c", kTp, "create_cache_entry", "dynamo"},
    {"dynamo.cache.entry_c", kTp, "CacheEntry_to_obj", "dynamo"},
    {"dynamo.cache.entry_cxx", kTp, "_ZN10CacheEntryD1Ev", "dynamo"},
    {"dynamo.extra_state.c", kTp, "get_extra_state", "dynamo"},
    {"dynamo.extra_state.c", kTp, "destroy_extra_state", "dynamo"},
    {"dynamo.extra_state.cxx", kTp, "_ZN10ExtraState10invalidateEP10CacheEntryN8pybind116objectE",
     "dynamo"},
    {"dynamo.eval_frame.c", kTp, "custom_eval_frame_shim", "dynamo"},
    {"dynamo.eval_frame.c", kTp, "_custom_eval_frame", "dynamo"},
    {"dynamo.eval_frame.c", kTp, "dynamo__custom_eval_frame", "dynamo"},
    {"dynamo.eval_frame.cpython_defs", kTp, "THP_PyFrame_FastToLocalsWithError", "dynamo"},
    {"dynamo.eval_frame.interpreter_frame", kTp, "THPPyInterpreterFrame_New", "dynamo"},
    {"dynamo.compiled_autograd", kTp,
     "_ZN5torch6dynamo8autograd16SwapSavedVariables6beforeERN2at6TensorE", "dynamo"},
    {"dynamo.namespace", "/tmp/ext/fake_dynamo.so", "_ZN5torch6dynamo4fake5crashEv", "dynamo"},
    // CUDA.
    {"cuda.at_cuda", "/x/libtorch_cuda.so", "_ZN2at4cuda20getCurrentCUDAStreamEa", "cuda"},
    {"cuda.c10_cuda", "/x/libc10_cuda.so",
     "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6mallocEPPvamP11CUstream_st",
     "cuda"},
    {"cuda.libtorch_cuda", "/x/libtorch_cuda.so", "cudnn_something", "cuda"},
    {"cuda.libc10_cuda", "/x/libc10_cuda.so", nullptr, "cuda"},
    {"cuda.driver", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", nullptr, "cuda"},
    {"cuda.runtime", "/x/nvidia/cuda_runtime/lib/libcudart.so.12", "cudaLaunchKernel", "cuda"},
    {"cuda.cublas", "/x/nvidia/cublas/lib/libcublasLt.so.12", nullptr, "cuda"},
    {"cuda.cudnn", "/x/nvidia/cudnn/lib/libcudnn_cnn_infer.so.8", nullptr, "cuda"},
    {"cuda.nccl", "/x/nvidia/nccl/lib/libnccl.so.2", "ncclAllReduce", "cuda"},
    {"cuda.libraries", "/x/nvidia/cufft/lib/libcufft.so.11", nullptr, "cuda"},
    {"cuda.libraries", "/x/libnvrtc.so.12", nullptr, "cuda"},
    // ATen and c10.
    {"aten.namespace", "/x/libtorch_cpu.so",
     "_ZN2at6native3sumERKNS_6TensorEN3c108optionalINS3_10ScalarTypeEEE", "aten"},
    {"aten.namespace", "/x/libtorch_cpu.so", "_ZNK2at10TensorBase4sizeEl", "aten"},
    {"aten.namespace", "/x/libtorch_cpu.so", "_ZZN2at6native3fooEvE1x", "aten"},
    {"aten.c10_namespace", "/x/libc10.so", "_ZN3c1013TensorImplD2Ev", "aten"},
    {"aten.libtorch_cpu", "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13", nullptr, "aten"},
    {"aten.libtorch", "/usr/lib/x86_64-linux-gnu/libtorch.so.1.13", nullptr, "aten"},
    {"aten.libc10", "/usr/lib/x86_64-linux-gnu/libc10.so.1.13", "memcpy_like", "aten"},
    // The rest of PyTorch.
    {"torch.libtorch_python", kTp, "_ZN5torch8autograd19THPVariable_tensorEv", "torch"},
    {"torch.libtorch_python", kTp, "lookup_something_else", "torch"},
    {"torch.extension_C", "/usr/lib/python3/dist-packages/torch/_C.cpython-311-x86_64-linux-gnu.so",
     "PyInit__C", "torch"},
    {"torch.namespace", "/x/libmine.so", "_ZN5torch3jit6Module7forwardEv", "torch"},
    // CPython.
    {"cpython.libpython", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", "PyObject_Call",
     "cpython"},
    {"cpython.executable", "/usr/bin/python3.11", "_PyEval_EvalFrameDefault", "cpython"},
    {"cpython.eval_private", "/opt/embedder/bin/server", "_PyEval_EvalFrameDefault", "cpython"},
    {"cpython.eval_public", "/opt/embedder/bin/server", "PyEval_EvalCode", "cpython"},
    // Everything else.
    {nullptr, "/usr/lib/x86_64-linux-gnu/libc.so.6", "__memmove_avx_unaligned_erms", "native"},
    {nullptr, nullptr, nullptr, "native"},
    // Near misses: generic names outside the module that owns them, look-alike libraries.
    {nullptr, "/usr/lib/x86_64-linux-gnu/libfoo.so", "lookup", "native"},
    {nullptr, "/usr/lib/x86_64-linux-gnu/libcurl.so.4", nullptr, "native"},
    {nullptr, "/usr/lib/x86_64-linux-gnu/libnvpair.so.3", nullptr, "native"},
    {nullptr, "/x/libfoo.so", "_ZN3std3atXEv", "native"},
    {nullptr, "/x/libfoo.so", "_ZNSt6vectorIN2at6TensorEE9push_backEv", "native"},
};

const Case kPythonCases[] = {
    {"fx.graph_code", "<eval_with_key>.3", "forward", "fx"},
    {"dynamo.resume_function", "/home/u/model.py", "torch_dynamo_resume_in_forward_at_42",
     "dynamo"},
    {"triton.cache.python", "/root/.triton/cache/ab/launcher.py", "launch", "triton"},
    {"inductor.output_code", "/tmp/torchinductor_alice/lk/clkx2ab3.py", "call", "inductor"},
    {"inductor.output_code", "/tmp/torchinductor_bob/fx_graph/cz/czq.py", "kernel", "inductor"},
    {"dynamo.eval_frame.python",
     "/opt/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", "_fn", "dynamo"},
    {"dynamo.convert_frame.python", "/src/torch/_dynamo/convert_frame.py", "_compile", "dynamo"},
    {"dynamo.symbolic_convert.python", "/src/torch/_dynamo/symbolic_convert.py", "run", "dynamo"},
    {"dynamo.guards.python", "/src/torch/_dynamo/guards.py", "compile_check_fn", "dynamo"},
    {"dynamo.output_graph.python", "/src/torch/_dynamo/output_graph.py",
     "compile_and_call_fx_graph", "dynamo"},
    {"dynamo.compiled_autograd.python",
     "/usr/lib/python3/dist-packages/torch/_dynamo/compiled_autograd.py", "runtime_wrapper",
     "dynamo"},
    {"dynamo.python", "/src/torch/_dynamo/variables/builder.py", "wrap", "dynamo"},
    {"aot_autograd.module", "/src/torch/_functorch/aot_autograd.py", "aot_module_simplified",
     "aot_autograd"},
    {"aot_autograd.package", "/src/torch/_functorch/_aot_autograd/jit_compile_runtime_wrappers.py",
     "aot_dispatch_base", "aot_autograd"},
    {"inductor.python", "/src/torch/_inductor/compile_fx.py", "compile_fx", "inductor"},
    {"fx.python", "/usr/lib/python3/dist-packages/torch/fx/graph_module.py", "__call__", "fx"},
    {"triton.python", "/opt/venv/lib/python3.11/site-packages/triton/runtime/jit.py", "run",
     "triton"},
    {"torch.python", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "_call_impl",
     "torch"},
    {"stdlib.frozen", "<frozen importlib._bootstrap>", "_call_with_frames_removed", "stdlib"},
    {"stdlib.lib", "/usr/lib/python3.11/threading.py", "run", "stdlib"},
    {"stdlib.lib", "/root/.pyenv/versions/3.12.1/lib/python3.12/runpy.py", "_run_code", "stdlib"},
    {"library.packages", "/opt/venv/lib/python3.11/site-packages/numpy/core/fromnumeric.py", "sum",
     "library"},
    {"library.packages", "/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py", "sum",
     "library"},
    {"library.numpy_dispatch", "<__array_function__ internals>", "apply_along_axis", "library"},
    {nullptr, "/home/u/train.py", "main", "python"},
    {nullptr, "<string>", "<module>", "python"},
    // A user project folder called torch is not PyTorch; a venv under lib/python3.X is not stdlib.
    {nullptr, "/home/u/torch/train.py", "main", "python"},
};

std::set<std::string>& exercised() {
  static std::set<std::string> names;
  return names;
}

// Checks each case's rule and origin; records the rules that matched.
template <size_t N>
void check_cases(const Case (&cases)[N], bool python) {
  classify_set_cache_dirs(nullptr, nullptr);
  for (const Case& k : cases) {
    CAPTURE(k.where);
    CAPTURE(k.what);
    const OriginRule* r =
        python ? match_python_rule(k.where, k.what) : match_native_rule(k.where, k.what);
    const Origin& o = python ? classify_python(k.where, k.what) : classify_native(k.where, k.what);
    if (k.rule) {
      REQUIRE(r != nullptr);
      CHECK(std::string(r->name) == k.rule);
      exercised().insert(r->name);
    } else {
      CHECK(r == nullptr);
    }
    CHECK(std::string(o.id) == k.origin);
    // The crash signature decides "generated" from the origin id and the
    // frame alone (what a report records); it must agree with the table.
    CHECK(signature_frame_generated(o.id, python, k.where, k.what) == o.generated);
  }
}

}  // namespace

TEST_CASE("native frames: each rule claims its frames") {
  check_cases(kNativeCases, false);
}

TEST_CASE("python frames: each rule claims its frames") {
  check_cases(kPythonCases, true);
}

TEST_CASE("cache directories moved by TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR") {
  const char* out = "/scratch/ind/ab/cabcd.py";
  const char* so = "/scratch/tri/99/__triton_launcher.so";
  CHECK(std::string(classify_python(out, "call").id) == "python");
  CHECK(std::string(classify_native("/scratch/tri/99/mod.so", "launch").id) == "native");
  classify_set_cache_dirs("/scratch/ind/", "/scratch/tri");
  CHECK(std::string(classify_python(out, "call").id) == "inductor");
  CHECK(std::string(classify_native("/scratch/tri/99/mod.so", "launch").id) == "triton");
  CHECK(std::string(classify_native(so, "_launch").id) == "triton");
  CHECK(std::string(classify_native("/scratch/ind/xy/cxy.so", "kernel").layer) ==
        std::string("an Inductor-generated C++ kernel"));
  // A report does not say where the caches were; the origin id it records is enough.
  CHECK(signature_frame_generated(classify_python(out, "call").id, true, out, "call"));
  CHECK(signature_frame_generated(classify_native(so, "_launch").id, false, so, "_launch"));
  // A sibling directory that merely shares the prefix is not the cache.
  CHECK(std::string(classify_python("/scratch/ind2/x.py", "f").id) == "python");
  classify_set_cache_dirs(nullptr, nullptr);
  CHECK(std::string(classify_python(out, "call").id) == "python");
}

TEST_CASE("origins carry a layer for the diagnosis, user code and generated code") {
  const Origin& g = classify_native(kTp, "_ZN5torch6dynamo12_GLOBAL__N_112GuardManager5checkEv");
  CHECK(std::string(g.layer) == "Dynamo guard evaluation");
  CHECK_FALSE(g.user);
  CHECK(classify_python("/home/u/model.py", "forward").user);
  CHECK(classify_python("/home/u/model.py", "torch_dynamo_resume_in_forward_at_42").user);
  CHECK_FALSE(classify_python("/usr/lib/python3.11/threading.py", "run").user);
  CHECK(classify_python("<eval_with_key>.12", "forward").generated);
  CHECK(classify_native("/tmp/torchinductor_u/ab/cab.so", "cpp_fused_0").generated);
  CHECK_FALSE(classify_native("/x/libtorch_cpu.so", "_ZN2at3addEv").generated);
}

TEST_CASE("glob") {
  CHECK(glob_match("*", ""));
  CHECK(glob_match("a*c", "abbbc"));
  CHECK(glob_match("a?c", "abc"));
  CHECK_FALSE(glob_match("a?c", "ac"));
  CHECK(glob_match("*/lib/python3.*/*", "/usr/lib/python3.11/os.py"));
  CHECK_FALSE(glob_match("*/lib/python3.*/*", "/usr/lib/python3/dist-packages/x.py"));
  CHECK(glob_match("*x*y*", "aaxbbxccy"));
  CHECK_FALSE(glob_match("*x*y*", "aaybbx"));
}

// Doctest runs test cases in file order; this one must stay last.
TEST_CASE("every rule of the table has a case above") {
  int n = 0;
  const OriginRule* rules = origin_rules(&n);
  REQUIRE(n > 0);
  std::set<std::string> names;
  for (int i = 0; i < n; ++i) {
    CAPTURE(rules[i].name);
    CHECK(names.insert(rules[i].name).second);  // names are unique
    CHECK(exercised().count(rules[i].name) == 1);
    CHECK(rules[i].origin.id[0] != '\0');
    CHECK(rules[i].origin.layer[0] != '\0');
  }
}
