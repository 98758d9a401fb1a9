// The frame-origin table: which layer of a PyTorch (or any) process a frame
// belongs to. Rules are data, matched in order, first match wins; doc/torch.md
// lists them for people and test/torch/classify_test.cpp exercises each one.
//
// Async-signal-safe: only string scans over the caller's strings and the
// static cache-directory buffers filled at install time.
#include "core/diagnosis/classify.h"

#include "core/base/str.h"

namespace faultline::core {
namespace {

// Where the Inductor and Triton caches live when the environment moved them
// (set at install time by classify_init(); empty: only the defaults apply).
// 1 KiB: longer than any cache directory anyone configures, small in .bss.
char g_inductor_dir[1024];
size_t g_inductor_dir_len;
char g_triton_dir[1024];
size_t g_triton_dir_len;

using K = MatchKind;

// Copies the pattern into the rule. Only ever evaluated at compile time (the
// table is constexpr): a pattern too long for Match::text writes past it,
// which no constant expression may do, so it fails the build.
constexpr Match match(K kind, const char* s) {
  Match m{kind, {}};
  int i = 0;
  for (; s[i]; ++i) m.text[i] = s[i];
  m.text[i] = '\0';
  return m;
}

constexpr Match kAnything = {K::kAny, {}};

// Shorthands that keep the table one row per rule.
constexpr Match prefix(const char* s) {
  return match(K::kPrefix, s);
}
constexpr Match contains(const char* s) {
  return match(K::kContains, s);
}
constexpr Match base(const char* s) {
  return match(K::kBasenamePrefix, s);
}
constexpr Match glob(const char* s) {
  return match(K::kGlob, s);
}
constexpr Match cxx(const char* s) {
  return match(K::kCxxNamespace, s);
}
constexpr Match inductor_cache() {
  return {K::kInductorCache, {}};
}
constexpr Match triton_cache() {
  return {K::kTritonCache, {}};
}

// The module that holds Dynamo's C/C++ (eval_frame.c, guards.cpp,
// cache_entry.cpp, extra_state.cpp); C names there are too generic
// ("lookup") to trust in any other module.
constexpr Match kTorchPython = match(K::kBasenamePrefix, "libtorch_python");

// Origins. Layer texts complete "SIGSEGV in <layer>".
constexpr Origin kNative = {"native", "native code", false, false};
constexpr Origin kPython = {"python", "Python code", true, false};

constexpr Origin kTritonKernel = {"triton", "a Triton kernel", false, true};
constexpr Origin kTritonLauncher = {"triton", "a Triton kernel launcher", false, true};
constexpr Origin kTritonCompiler = {"triton", "the Triton compiler (libtriton)", false, false};
constexpr Origin kTritonPy = {"triton", "the Triton runtime", false, false};
constexpr Origin kInductorKernel = {"inductor", "an Inductor-generated C++ kernel", false, true};
constexpr Origin kInductorOutput = {"inductor", "Inductor output code", false, true};
constexpr Origin kInductorPy = {"inductor", "the Inductor compiler", false, false};
// AOTInductor: a model compiled ahead of time into a package (.pt2) whose
// shared library (data/aotinductor/<model>/<hash>.so, extracted by the loader
// into a temporary directory) holds the kernels and the generated runtime
// that runs them; libtorch's runner loads and calls it.
constexpr Origin kAotiModel = {"inductor", "an AOTInductor-compiled model", false, true};
constexpr Origin kAotiRuntime = {"inductor", "the AOTInductor runtime of a compiled model", false,
                                 true};
constexpr Origin kAotiRunner = {"torch", "libtorch's AOTInductor model runner", false, false};

constexpr Origin kDynamoGuards = {"dynamo", "Dynamo guard evaluation", false, false};
constexpr Origin kDynamoCache = {"dynamo", "Dynamo cache lookup", false, false};
constexpr Origin kDynamoExtraState = {"dynamo", "Dynamo code-object extra state", false, false};
constexpr Origin kDynamoEvalFrame = {"dynamo", "Dynamo's frame evaluation hook", false, false};
constexpr Origin kDynamoAutograd = {"dynamo", "Dynamo compiled autograd", false, false};
constexpr Origin kDynamoNative = {"dynamo", "TorchDynamo (C++)", false, false};
constexpr Origin kDynamoEvalFramePy = {"dynamo", "Dynamo frame evaluation", false, false};
constexpr Origin kDynamoConvert = {"dynamo", "Dynamo frame conversion", false, false};
constexpr Origin kDynamoTrace = {"dynamo", "Dynamo bytecode tracing", false, false};
constexpr Origin kDynamoGuardsPy = {"dynamo", "Dynamo guard building", false, false};
constexpr Origin kDynamoOutput = {"dynamo", "Dynamo graph compilation", false, false};
constexpr Origin kDynamoPy = {"dynamo", "TorchDynamo", false, false};
// User code Dynamo split at a graph break; the name keeps the user's
// function and line (torch_dynamo_resume_in_forward_at_42).
constexpr Origin kDynamoResume = {"dynamo", "a Dynamo resume function", true, true};
constexpr Origin kAotAutograd = {"aot_autograd", "AOTAutograd", false, false};
constexpr Origin kFxGraph = {"fx", "FX graph code", false, true};
constexpr Origin kFx = {"fx", "torch.fx", false, false};

constexpr Origin kTorchCuda = {"cuda", "PyTorch's CUDA code", false, false};
constexpr Origin kCudaDriver = {"cuda", "the CUDA driver (libcuda)", false, false};
constexpr Origin kCudaRuntime = {"cuda", "the CUDA runtime (libcudart)", false, false};
constexpr Origin kCublas = {"cuda", "cuBLAS", false, false};
constexpr Origin kCudnn = {"cuda", "cuDNN", false, false};
constexpr Origin kNccl = {"cuda", "NCCL", false, false};
constexpr Origin kCudaLib = {"cuda", "a CUDA library", false, false};
constexpr Origin kAten = {"aten", "an ATen operator", false, false};
constexpr Origin kC10 = {"aten", "c10 (PyTorch core)", false, false};
constexpr Origin kLibtorch = {"aten", "libtorch (ATen)", false, false};
constexpr Origin kTorchBindings = {"torch", "PyTorch's Python bindings (libtorch_python)", false,
                                   false};
constexpr Origin kTorchCxx = {"torch", "PyTorch C++ (torch::)", false, false};
constexpr Origin kTorchPy = {"torch", "PyTorch (Python)", false, false};
constexpr Origin kCpython = {"cpython", "the CPython interpreter", false, false};
constexpr Origin kStdlib = {"stdlib", "the Python standard library", false, false};
constexpr Origin kLibrary = {"library", "a third-party Python package", false, false};

// The table. Specific before general: Dynamo's names in libtorch_python come
// before libtorch_python as a whole, at::cuda before at::, the Inductor
// cache's triton/ folder before the Inductor cache.
constexpr OriginRule kRules[] = {
    // ---- native: generated kernels first (their names win wherever they live)
    {"triton.kernel.pointwise", false, kAnything, prefix("triton_poi_"), "", kTritonKernel},
    {"triton.kernel.reduction", false, kAnything, prefix("triton_red_"), "", kTritonKernel},
    {"triton.kernel.persistent", false, kAnything, prefix("triton_per_"), "", kTritonKernel},
    {"triton.kernel.template", false, kAnything, prefix("triton_tem_"), "", kTritonKernel},
    {"triton.kernel.other", false, kAnything, prefix("triton_"), "", kTritonKernel},
    {"triton.cache.module", false, triton_cache(), kAnything, "", kTritonLauncher},
    {"triton.launcher.module", false, base("__triton_launcher"), kAnything, "", kTritonLauncher},
    {"triton.libtriton", false, base("libtriton"), kAnything, "", kTritonCompiler},
    {"inductor.kernel.cpp_fused", false, kAnything, prefix("cpp_fused_"), "", kInductorKernel},
    {"inductor.cache.module", false, inductor_cache(), kAnything, "", kInductorKernel},
    // ---- native: AOTInductor (kernels are cpp_fused_*, above)
    {"aoti.runtime.namespace", false, kAnything, cxx("5torch12aot_inductor"), "", kAotiRuntime},
    {"aoti.runtime.c_api", false, kAnything, prefix("AOTInductorModel"), "", kAotiRuntime},
    {"aoti.package.module", false, contains("/data/aotinductor/"), kAnything, "", kAotiModel},
    {"aoti.runner.package_loader", false, kAnything, cxx("5torch8inductor22AOTIModelPackageLoader"),
     "", kAotiRunner},
    {"aoti.runner.container", false, kAnything, cxx("5torch8inductor24AOTIModelContainerRunner"),
     "", kAotiRunner},
    // ---- native: Dynamo's C/C++ (torch/csrc/dynamo)
    {"dynamo.guards.namespace", false, kAnything, glob("_Z*5torch6dynamo*Guard*"), "",
     kDynamoGuards},
    {"dynamo.guards.tensor_guards", false, kTorchPython, glob("*TensorGuards*"), "", kDynamoGuards},
    {"dynamo.guards.tensor_check", false, kTorchPython, glob("*TensorCheck*"), "", kDynamoGuards},
    {"dynamo.cache.c",
     false,
     kTorchPython,
     {K::kExact,
      "lookup|create_cache_entry|extract_cache_entry|cache_entry_dealloc|"
      "_debug_get_cache_entry_list"},
     "",
     kDynamoCache},
    {"dynamo.cache.entry_c", false, kTorchPython, prefix("CacheEntry_"), "", kDynamoCache},
    {"dynamo.cache.entry_cxx", false, kTorchPython, cxx("10CacheEntry"), "", kDynamoCache},
    {"dynamo.extra_state.c",
     false,
     kTorchPython,
     {K::kExact,
      "get_extra_state|set_extra_state|init_and_set_extra_state|destroy_extra_state|"
      "extract_frame_state|extra_state_get_action|extra_state_set_action"},
     "",
     kDynamoExtraState},
    {"dynamo.extra_state.cxx", false, kTorchPython, cxx("10ExtraState"), "", kDynamoExtraState},
    {"dynamo.eval_frame.c",
     false,
     kTorchPython,
     {K::kExact,
      "custom_eval_frame_shim|_custom_eval_frame_shim|_custom_eval_frame|"
      "dynamo__custom_eval_frame|dynamo_eval_frame_default|dynamo_eval_custom_code|"
      "eval_frame_default|eval_custom_code|eval_custom_code_impl|call_callback|"
      "dynamo_call_callback|set_eval_frame|set_eval_frame_py|dynamo_set_eval_frame|"
      "enable_eval_frame_shim|enable_eval_frame_default|callback_from_frame|skip_code_recursive"},
     "",
     kDynamoEvalFrame},
    // Dynamo's copies of CPython internals (cpython_defs.c): THP_PyFrame_*, THP_PyEval_*.
    {"dynamo.eval_frame.cpython_defs", false, kTorchPython, prefix("THP_Py"), "", kDynamoEvalFrame},
    {"dynamo.eval_frame.interpreter_frame", false, kTorchPython, prefix("THPPyInterpreterFrame"),
     "", kDynamoEvalFrame},
    {"dynamo.compiled_autograd", false, kAnything, cxx("5torch6dynamo8autograd"), "",
     kDynamoAutograd},
    {"dynamo.namespace", false, kAnything, cxx("5torch6dynamo"), "", kDynamoNative},
    // ---- native: CUDA
    {"cuda.at_cuda", false, kAnything, cxx("2at4cuda"), "", kTorchCuda},
    {"cuda.c10_cuda", false, kAnything, cxx("3c104cuda"), "", kTorchCuda},
    {"cuda.libtorch_cuda", false, base("libtorch_cuda"), kAnything, "", kTorchCuda},
    {"cuda.libc10_cuda", false, base("libc10_cuda"), kAnything, "", kTorchCuda},
    {"cuda.driver", false, base("libcuda.so"), kAnything, "", kCudaDriver},
    {"cuda.runtime", false, base("libcudart"), kAnything, "", kCudaRuntime},
    {"cuda.cublas", false, base("libcublas"), kAnything, "", kCublas},
    {"cuda.cudnn", false, base("libcudnn"), kAnything, "", kCudnn},
    {"cuda.nccl", false, base("libnccl"), kAnything, "", kNccl},
    {"cuda.libraries", false,
     base("libcufft|libcurand|libcusparse|libcusolver|libcupti|libcufile|libnvrtc|libnvJitLink|"
          "libnvToolsExt|libnvidia-"),
     kAnything, "", kCudaLib},
    // ---- native: ATen and c10
    {"aten.namespace", false, kAnything, cxx("2at"), "", kAten},
    {"aten.c10_namespace", false, kAnything, cxx("3c10"), "", kC10},
    {"aten.libtorch_cpu", false, base("libtorch_cpu"), kAnything, "", kLibtorch},
    {"aten.libtorch", false, base("libtorch.so"), kAnything, "", kLibtorch},
    {"aten.libc10", false, base("libc10"), kAnything, "", kC10},
    // ---- native: the rest of PyTorch
    {"torch.libtorch_python", false, kTorchPython, kAnything, "", kTorchBindings},
    {"torch.extension_C", false, glob("*/torch/_C.*"), kAnything, "", kTorchBindings},
    {"torch.namespace", false, kAnything, cxx("5torch"), "", kTorchCxx},
    // ---- native: CPython
    {"cpython.libpython", false, base("libpython"), kAnything, "", kCpython},
    {"cpython.executable", false, base("python"), kAnything, "", kCpython},
    {"cpython.eval_private", false, kAnything, prefix("_PyEval_"), "", kCpython},
    {"cpython.eval_public", false, kAnything, prefix("PyEval_"), "", kCpython},

    // ---- Python: generated code first
    {"fx.graph_code", true, prefix("<eval_with_key>"), kAnything, "", kFxGraph},
    {"dynamo.resume_function", true, kAnything, contains("torch_dynamo_resume_in_"), "",
     kDynamoResume},
    {"triton.cache.python", true, triton_cache(), kAnything, "", kTritonPy},
    {"inductor.output_code", true, inductor_cache(), kAnything, "", kInductorOutput},
    // ---- Python: torch/_dynamo and its compile stack
    {"dynamo.eval_frame.python", true, contains("/torch/_dynamo/eval_frame.py"), kAnything, "",
     kDynamoEvalFramePy},
    {"dynamo.convert_frame.python", true, contains("/torch/_dynamo/convert_frame.py"), kAnything,
     "", kDynamoConvert},
    {"dynamo.symbolic_convert.python", true, contains("/torch/_dynamo/symbolic_convert.py"),
     kAnything, "", kDynamoTrace},
    {"dynamo.guards.python", true, contains("/torch/_dynamo/guards.py"), kAnything, "",
     kDynamoGuardsPy},
    {"dynamo.output_graph.python", true, contains("/torch/_dynamo/output_graph.py"), kAnything, "",
     kDynamoOutput},
    {"dynamo.compiled_autograd.python", true, contains("/torch/_dynamo/compiled_autograd.py"),
     kAnything, "", kDynamoAutograd},
    {"dynamo.python", true, contains("/torch/_dynamo/"), kAnything, "", kDynamoPy},
    {"aot_autograd.module", true, contains("/torch/_functorch/aot_autograd.py"), kAnything, "",
     kAotAutograd},
    {"aot_autograd.package", true, contains("/torch/_functorch/_aot_autograd/"), kAnything, "",
     kAotAutograd},
    {"inductor.python", true, contains("/torch/_inductor/"), kAnything, "", kInductorPy},
    {"fx.python", true, contains("/torch/fx/"), kAnything, "", kFx},
    {"triton.python", true, contains("-packages/triton/"), kAnything, "", kTritonPy},
    {"torch.python", true, contains("-packages/torch/"), kAnything, "", kTorchPy},
    // ---- Python: the standard library, other packages; the rest is user code
    {"stdlib.frozen", true, prefix("<frozen "), kAnything, "", kStdlib},
    {"stdlib.lib", true, glob("*/lib/python3.*/*"), kAnything, "-packages/", kStdlib},
    {"library.packages", true, contains("-packages/"), kAnything, "", kLibrary},
    // numpy's __array_function__ dispatch shims (numpy < 1.25) name no file.
    {"library.numpy_dispatch", true, prefix("<__array_function__ internals>"), kAnything, "",
     kLibrary},
};

constexpr int kRuleCount = static_cast<int>(sizeof kRules / sizeof kRules[0]);

// `s` equals (whole) or starts with (!whole) one of the '|'-separated words
// of `alternatives`.
bool one_of(const char* s, const char* alternatives, bool whole) {
  const char* word = alternatives;
  for (const char* p = alternatives;; ++p) {
    if (*p == '|' || *p == '\0') {
      size_t n = static_cast<size_t>(p - word);
      size_t i = 0;
      while (i < n && s[i] == word[i]) ++i;
      if (i == n && (!whole || s[n] == '\0')) return true;
      if (*p == '\0') return false;
      word = p + 1;
    }
  }
}

// An Itanium-mangled name whose outermost scope is `ns` ("2at"): _ZN<ns>,
// with an optional local-entity Z (_ZZN...) and cv/ref qualifiers (_ZNK...).
bool in_cxx_namespace(const char* s, const char* ns) {
  if (s[0] != '_' || s[1] != 'Z') return false;
  const char* p = s + 2;
  if (*p == 'Z') ++p;
  if (*p != 'N') return false;
  ++p;
  while (*p == 'K' || *p == 'V' || *p == 'r' || *p == 'R' || *p == 'O') ++p;
  return str_starts_with(p, ns);
}

// The part of `path` below the Inductor cache root, or nullptr when the path
// is not under it: $TORCHINDUCTOR_CACHE_DIR, or a directory named
// torchinductor_<user> (Inductor's default, in the temp directory).
const char* inductor_cache_rest(const char* path) {
  if (g_inductor_dir_len && str_starts_with(path, g_inductor_dir) &&
      path[g_inductor_dir_len] == '/') {
    return path + g_inductor_dir_len;
  }
  return str_find(path, str_len(path), "/torchinductor_");
}

// Triton's kernel cache: $TRITON_CACHE_DIR, ~/.triton/cache, or the triton/
// folder Inductor keeps inside its own cache.
bool in_triton_cache(const char* path) {
  if (g_triton_dir_len && str_starts_with(path, g_triton_dir) && path[g_triton_dir_len] == '/') {
    return true;
  }
  if (str_find(path, str_len(path), "/.triton/cache/")) return true;
  const char* rest = inductor_cache_rest(path);
  return rest && str_find(rest, str_len(rest), "/triton/");
}

bool matches(const Match& m, const char* s) {
  if (m.kind == K::kAny) return true;
  if (!s) return false;
  switch (m.kind) {
    case K::kAny:
      return true;
    case K::kExact:
      return one_of(s, m.text, true);
    case K::kPrefix:
      return one_of(s, m.text, false);
    case K::kContains:
      return str_find(s, str_len(s), m.text) != nullptr;
    case K::kBasenamePrefix:
      return one_of(path_basename(s), m.text, false);
    case K::kGlob:
      return glob_match(m.text, s);
    case K::kCxxNamespace:
      return in_cxx_namespace(s, m.text);
    case K::kInductorCache:
      return inductor_cache_rest(s) != nullptr;
    case K::kTritonCache:
      return in_triton_cache(s);
  }
  return false;
}

const OriginRule* first_match(bool python, const char* where, const char* what) {
  for (const OriginRule& r : kRules) {
    if (r.python != python) continue;
    if (!matches(r.where, where) || !matches(r.what, what)) continue;
    if (r.unless[0] && where && str_find(where, str_len(where), r.unless)) continue;
    return &r;
  }
  return nullptr;
}

void set_dir(char* dst, size_t cap, size_t* len, const char* src) {
  if (!src) src = "";
  // Unset and never set: no write (a first write is a page fault at start).
  if (!*src && *len == 0) return;
  size_t n = str_copy(dst, cap, src);
  while (n > 1 && dst[n - 1] == '/') dst[--n] = '\0';  // "/a/b/" and "/a/b" are one place
  *len = n;
}

}  // namespace

bool glob_match(const char* pattern, const char* text) {
  // Iterative wildcard match: on a mismatch after a '*', let that star eat
  // one more character and retry. No recursion, so no stack growth.
  const char* p = pattern;
  const char* t = text;
  const char* star = nullptr;
  const char* star_text = nullptr;
  while (*t) {
    if (*p == '*') {
      star = p++;
      star_text = t;
    } else if (*p && (*p == '?' || *p == *t)) {
      ++p;
      ++t;
    } else if (star) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (*p == '*') ++p;
  return *p == '\0';
}

const OriginRule* match_native_rule(const char* module, const char* symbol) {
  return first_match(false, module, symbol);
}

const OriginRule* match_python_rule(const char* file, const char* function) {
  return first_match(true, file, function);
}

const Origin& classify_native(const char* module, const char* symbol) {
  const OriginRule* r = match_native_rule(module, symbol);
  return r ? r->origin : kNative;
}

const Origin& classify_python(const char* file, const char* function) {
  const OriginRule* r = match_python_rule(file, function);
  return r ? r->origin : kPython;
}

const OriginRule* origin_rules(int* count) {
  *count = kRuleCount;
  return kRules;
}

void classify_set_cache_dirs(const char* inductor_dir, const char* triton_dir) {
  set_dir(g_inductor_dir, sizeof g_inductor_dir, &g_inductor_dir_len, inductor_dir);
  set_dir(g_triton_dir, sizeof g_triton_dir, &g_triton_dir_len, triton_dir);
}

}  // namespace faultline::core
