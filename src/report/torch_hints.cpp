// Known PyTorch crash patterns (see torch_hints.h). The table below is the
// whole knowledge; match_hints() only gathers evidence and applies it.
#include "report/torch_hints.h"

#include <fmt/format.h>

#include <map>
#include <regex>

namespace faultline::report {
namespace {

using json = nlohmann::json;

// One known pattern. Every condition that is set must hold.
struct HintPattern {
  const char* id;
  const char* title;
  // The same function compiled at least this often (0: not needed).
  int min_compiles_of_one_function;
  // The innermost frame outside libc and unknown code ("native") has one of
  // these origins (empty: not needed).
  std::vector<std::string> innermost_origins;
  // One of these origins among the crashed thread's top kNearTop frames.
  std::vector<std::string> near_top_origins;
  // diagnosis.category is one of these (empty: any).
  std::vector<std::string> categories;
  std::vector<const char*> advice;
};

// How deep "near the top of the crashed stack" reaches: deep enough to go
// from a kernel through the dispatcher to Dynamo's hook, shallow enough
// that every PyTorch job (whose stack bottom is always torch) does not match.
constexpr size_t kNearTop = 24;

const std::vector<HintPattern>& patterns() {
  static const std::vector<HintPattern> kPatterns = {
      {"torch.repeated-compile",
       "torch.compile compiled the same function again and again before the crash (the "
       "repeated-compile pattern: Dynamo's cache and guards for that code grow with every "
       "compile)",
       3,
       {},
       {},
       {},
       {"Compile once and reuse the compiled module: call torch.compile(model) outside the loop "
        "and keep the handle, instead of compiling a new ModuleList/model each iteration.",
        "For inputs whose shapes vary, compile with dynamic=True (or mark the varying dimensions "
        "with torch._dynamo.mark_dynamic) so one graph serves every shape.",
        "If recompiles are expected, raise torch._dynamo.config.cache_size_limit (newer "
        "versions: recompile_limit) and torch._dynamo.config.accumulated_cache_size_limit.",
        "Before compiling again, del the old compiled handle (and call torch._dynamo.reset() "
        "when the old code is no longer needed) so its cache entries and guards are freed.",
        "Upgrade PyTorch: crashes in Dynamo's cache and guard code have been fixed in later "
        "releases.",
        "TORCH_LOGS=recompiles shows why each recompilation happened."}},
      {"torch.dynamo-internal",
       "The crash is inside TorchDynamo's own code (frame-evaluation hook, guards or cache)",
       0,
       {},
       {"dynamo"},
       {},
       {"Run once with TORCHDYNAMO_DISABLE=1 (or torch.compile(..., backend=\"eager\")) to see "
        "whether the crash needs Dynamo.",
        "TORCH_LOGS=recompiles,guards shows what Dynamo compiled and guarded before the crash.",
        "Upgrade PyTorch, and search pytorch/pytorch issues for the innermost Dynamo frame."}},
      {"torch.generated-code",
       "The crash is in code that torch.compile generated (Inductor output, a Triton or C++ "
       "kernel)",
       0,
       {"inductor", "triton"},
       {},
       {},
       {"Compile with backend=\"aot_eager\" to see whether Inductor's generated code is the "
        "cause.",
        "TORCH_COMPILE_DEBUG=1 keeps the generated code of the crashing kernel for a bug report.",
        "On GPU, CUDA_LAUNCH_BLOCKING=1 makes the failing kernel the one on the stack."}},
      {"torch.aten-memory",
       "An ATen kernel read or wrote memory outside its tensor: a tensor's sizes and strides "
       "describe more memory than its storage holds",
       0,
       {"aten"},
       {},
       {"memory-access", "null-deref", "bus-error"},
       {"Look for tensors made from foreign memory: torch.from_numpy of as_strided or otherwise "
        "strided arrays, torch.as_strided, torch.frombuffer, from_blob or DLPack in extensions.",
        "Check the sizes, strides and storage size of the operator's inputs just before the "
        "call (tensor.stride(), tensor.untyped_storage().nbytes()).",
        "TORCH_SHOW_CPP_STACKTRACES=1 and a debug build of PyTorch name the kernel's source "
        "line."}},
  };
  return kPatterns;
}

const json* find(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string str_field(const json& j, const char* key) {
  const json* v = find(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

const json* crashed_thread(const json& report) {
  const json* threads = find(report, "threads");
  if (!threads || !threads->is_array()) return nullptr;
  for (const json& t : *threads) {
    const json* c = find(t, "crashed");
    if (c && c->is_boolean() && c->get<bool>()) return &t;
  }
  return nullptr;
}

std::string frame_name(const json& f) {
  if (str_field(f, "kind") == "python") {
    const json* line = find(f, "line");
    return fmt::format(
        "{} ({}:{})", str_field(f, "function"), str_field(f, "file"),
        line && line->is_number_integer() ? std::to_string(line->get<int64_t>()) : "?");
  }
  std::string module = str_field(f, "module");
  size_t slash = module.rfind('/');
  if (slash != std::string::npos) module = module.substr(slash + 1);
  std::string symbol = str_field(f, "symbol");
  return module + (symbol.empty() ? "+" + str_field(f, "module_offset") : "!" + symbol);
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const std::string& x : v) {
    if (x == s) return true;
  }
  return false;
}

// What the report offers as evidence, gathered once.
struct Evidence {
  // Compile events per "function (location)", in breadcrumb order.
  std::map<std::string, std::vector<CompileEvent>> compiles;
  const json* frames = nullptr;  // the crashed thread's frames
  std::string category;
};

Evidence gather(const json& report) {
  Evidence e;
  const json* crumbs = find(report, "breadcrumbs");
  if (crumbs && crumbs->is_array()) {
    for (const json& b : *crumbs) {
      CompileEvent ev;
      if (parse_compile_breadcrumb(str_field(b, "message"), &ev)) {
        e.compiles[ev.function + " (" + ev.location + ")"].push_back(ev);
      }
    }
  }
  const json* t = crashed_thread(report);
  const json* frames = t ? find(*t, "frames") : nullptr;
  if (frames && frames->is_array()) e.frames = frames;
  const json* d = find(report, "diagnosis");
  if (d) e.category = str_field(*d, "category");
  return e;
}

// The most compiled function: its key and events.
const std::pair<const std::string, std::vector<CompileEvent>>* most_compiled(const Evidence& e) {
  const std::pair<const std::string, std::vector<CompileEvent>>* best = nullptr;
  int best_n = 0;
  for (const auto& kv : e.compiles) {
    int n = 0;
    for (const CompileEvent& ev : kv.second) n = std::max(n, ev.compiles);
    n = std::max(n, static_cast<int>(kv.second.size()));
    if (n > best_n) best = &kv, best_n = n;
  }
  return best;
}

bool apply(const HintPattern& p, const Evidence& e, Hint* out) {
  std::vector<std::string> evidence;
  if (p.min_compiles_of_one_function > 0) {
    const auto* mc = most_compiled(e);
    if (!mc) return false;
    const std::vector<CompileEvent>& evs = mc->second;
    int n = static_cast<int>(evs.size());
    for (const CompileEvent& ev : evs) n = std::max(n, ev.compiles);
    if (n < p.min_compiles_of_one_function) return false;
    std::string text = fmt::format("breadcrumbs: {} compiled {} times", mc->first, n);
    if (!evs.back().compile_id.empty()) {
      text += fmt::format(" (compile ids {} .. {})", evs.front().compile_id, evs.back().compile_id);
    }
    for (auto it = evs.rbegin(); it != evs.rend(); ++it) {
      if (!it->reason.empty()) {
        text += "; last recompile reason: " + it->reason;
        break;
      }
    }
    evidence.push_back(text);
  }
  if (!p.categories.empty()) {
    if (!contains(p.categories, e.category)) return false;
    evidence.push_back("diagnosis.category: " + e.category);
  }
  if (!p.innermost_origins.empty()) {
    if (!e.frames) return false;
    bool found = false;
    for (size_t i = 0; i < e.frames->size(); ++i) {
      const json& f = (*e.frames)[i];
      std::string origin = str_field(f, "origin");
      if (origin == "native" || origin.empty()) continue;
      if (!contains(p.innermost_origins, origin)) return false;
      evidence.push_back(fmt::format("crashed thread: innermost frame #{} {} is {} code", i,
                                     frame_name(f), origin));
      found = true;
      break;
    }
    if (!found) return false;
  }
  if (!p.near_top_origins.empty()) {
    if (!e.frames) return false;
    size_t count = 0, first = 0;
    for (size_t i = 0; i < e.frames->size() && i < kNearTop; ++i) {
      if (contains(p.near_top_origins, str_field((*e.frames)[i], "origin"))) {
        if (count++ == 0) first = i;
      }
    }
    if (count == 0) return false;
    evidence.push_back(fmt::format("crashed thread: {} {} frame(s) among the top {}, first #{} {}",
                                   count, str_field((*e.frames)[first], "origin"), kNearTop, first,
                                   frame_name((*e.frames)[first])));
  }
  out->id = p.id;
  out->title = p.title;
  out->evidence = std::move(evidence);
  out->advice.assign(p.advice.begin(), p.advice.end());
  return true;
}

}  // namespace

json Hint::to_json() const {
  return json{
      {"id", id}, {"title", title}, {"text", title}, {"evidence", evidence}, {"advice", advice}};
}

bool parse_compile_breadcrumb(const std::string& message, CompileEvent* out) {
  // Written by python/faultline/_torch.py (_record); keep the two in step.
  static const std::regex kCompile(
      R"(^torch\.compile: compiling (\S+) \((.*):(\d+)\)(?: compile_id=(\S+))? compiles=(\d{1,9})(?: reason: (.*))?$)");
  std::smatch m;
  if (!std::regex_match(message, m, kCompile)) return false;
  out->function = m[1];
  out->location = std::string(m[2]) + ":" + std::string(m[3]);
  out->compile_id = m[4];
  out->compiles = std::stoi(m[5]);
  out->reason = m[6];
  return true;
}

std::vector<Hint> match_hints(const json& report) {
  std::vector<Hint> hints;
  if (!report.is_object()) return hints;
  Evidence e = gather(report);
  for (const HintPattern& p : patterns()) {
    Hint h;
    if (apply(p, e, &h)) hints.push_back(std::move(h));
  }
  // A handler in front of faultline's raised the fault again: UCX's, where
  // the job loaded it (torch builds with UCX do), prints its own backtrace
  // first and is the reason the report says so.
  const json* sig = find(report, "signal");
  const json* rr = sig ? find(*sig, "reraised") : nullptr;
  const json* modules = find(report, "modules");
  if (rr && modules && modules->is_array()) {
    for (const json& m : *modules) {
      std::string path = str_field(m, "path");
      if (path.find("/libucs.so") == std::string::npos) continue;
      Hint h;
      h.id = "ucx.error-handler";
      h.title =
          "UCX's error handler ran before faultline's: it printed its own backtrace, raised the "
          "fault again and returned; the report describes the original fault";
      h.evidence = {fmt::format("signal.reraised: {} ({}) sent by the process itself",
                                str_field(*rr, "name"), str_field(*rr, "code_name")),
                    "modules: " + path};
      h.advice = {
          "UCX_HANDLE_ERRORS=none leaves crash handling to faultline alone (one report, "
          "no second backtrace on stderr)."};
      hints.push_back(std::move(h));
      break;
    }
  }
  // Dynamo frames on the stack support the repeated-compile hint too.
  if (!hints.empty() && hints.front().id == "torch.repeated-compile") {
    for (const Hint& h : hints) {
      if (h.id == "torch.dynamo-internal") {
        hints.front().evidence.insert(hints.front().evidence.end(), h.evidence.begin(),
                                      h.evidence.end());
      }
    }
  }
  return hints;
}

}  // namespace faultline::report
