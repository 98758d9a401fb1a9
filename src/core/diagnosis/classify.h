// Frame classification: which layer of the stack a frame belongs to (its
// `origin` in the report: "python", "cpython", "dynamo", "inductor", "fx",
// "triton", "aten", ...). The rules are one data table (classify.cpp), each
// a path or symbol pattern with the origin it gives and the layer it names in
// a diagnosis ("Dynamo guard evaluation"). The first rule that matches wins;
// a frame no rule matches is "native" (native frames) or user code "python"
// (Python frames).
//
//   const Origin& o = classify_native("/.../libtorch_python.so", "_ZN5torch6dynamo...");
//   o.id     -> "dynamo"
//   o.layer  -> "Dynamo guard evaluation"
//
// Async-signal-safe: pure functions over strings, no allocation, no locks.
// classify_init() is the one exception: it reads the environment and must
// run at install time.
#pragma once

#include <stdint.h>
#include <stdlib.h>

namespace faultline::core {

// The table holds its text, no pointers: a table of pointers is relocated
// by the loader at every start (a copy-on-write of its pages in every
// process under the preload, ~50 us a page in a virtual machine).
struct Origin {
  char id[16];     // "dynamo"
  char layer[48];  // "Dynamo guard evaluation" (for the diagnosis)
  bool user;       // user code (the frame a diagnosis names as "while calling")
  // Generated code whose file or module names carry hashes or counters
  // (Inductor output, Triton cache, FX `<eval_with_key>.N`): a crash
  // signature should hash `id` and the symbol or function, not the path.
  bool generated;
};

// The longest pattern a rule may hold, with its terminating NUL.
constexpr int kMatchTextMax = 384;

// How one side of a rule matches a string (module path or symbol; Python
// file or function). Patterns are plain text, never regular expressions;
// kExact, kPrefix and kBasenamePrefix take '|'-separated alternatives.
enum class MatchKind : uint8_t {
  kAny,             // matches everything, including a missing string
  kExact,           // the whole string
  kPrefix,          // the string starts with text
  kContains,        // text occurs anywhere
  kBasenamePrefix,  // the part after the last '/' starts with text
  kGlob,            // whole string against text with '*' (any run) and '?' (one char)
  kCxxNamespace,    // an Itanium-mangled name (_ZN, _ZNK, _ZZN...) in namespace text
                    // ("2at" for at::, "5torch6dynamo" for torch::dynamo)
  kInductorCache,   // a path under the Inductor cache ($TORCHINDUCTOR_CACHE_DIR or
                    // a directory named torchinductor_<user>); text unused
  kTritonCache,     // a path under the Triton cache ($TRITON_CACHE_DIR or
                    // .triton/cache, or triton/ inside the Inductor cache)
};

struct Match {
  MatchKind kind;
  char text[kMatchTextMax];  // "" for kinds that take no text
};

// One row of the table. `where` tests the module path (native) or
// co_filename (Python); `what` the symbol or co_name. Both must match, and
// `unless` (a substring of the path, or "") must not occur.
struct OriginRule {
  char name[40];  // stable rule name, for tests and docs ("dynamo.guards.native")
  bool python;    // a rule for Python frames (else native frames)
  Match where;
  Match what;
  char unless[24];  // "": no exception
  Origin origin;
};

// module: the module path (may be nullptr); symbol: raw, possibly mangled.
const Origin& classify_native(const char* module, const char* symbol);
// file: co_filename; function: co_name (or qualname).
const Origin& classify_python(const char* file, const char* function);

// The rule that decided, or nullptr when the default applied.
const OriginRule* match_native_rule(const char* module, const char* symbol);
const OriginRule* match_python_rule(const char* file, const char* function);

// The whole table, in match order (tests check every rule is exercised).
const OriginRule* origin_rules(int* count);

// Sets the two cache directories (nullptr or "" clears; copied into static
// storage). Not for use while a crash is being handled.
void classify_set_cache_dirs(const char* inductor_dir, const char* triton_dir);

// Install time only: remembers TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR
// so frames under them classify as Inductor and Triton code. Without it only
// the default locations (torchinductor_<user>, .triton/cache) are recognised.
// Inline so that getenv is compiled into the install-time caller, never into
// the crash-path objects.
// `first`: the first install, which skips the call when neither is set.
inline void classify_init(bool first = false) {
  const char* inductor = getenv("TORCHINDUCTOR_CACHE_DIR");
  const char* triton = getenv("TRITON_CACHE_DIR");
  if (!first || inductor || triton) classify_set_cache_dirs(inductor, triton);
}

// The glob used by MatchKind::kGlob, exposed for tests.
bool glob_match(const char* pattern, const char* text);

}  // namespace faultline::core
