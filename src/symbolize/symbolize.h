// Offline native symbolization: turns an address inside an ELF module into
// function, file, line, column and the chain of inlined calls, using elfutils
// libdw. Never used by the crash path.
//
//   faultline::symbolize::SearchOptions options;           // where to look for debug info
//   faultline::symbolize::Symbolizer symbolizer(options);  // caches modules
//   Module& m = symbolizer.module("/usr/lib/x86_64-linux-gnu/libc.so.6", build_id_hex);
//   AddressInfo info = m.lookup(0x16a4bf);                  // an ELF virtual address
//
// A Module opens its files and locates its debug information once; every
// lookup after that works on in-memory indexes (no file is reopened per
// address). Nothing here throws on bad input files: a module that cannot be
// used says why in error() and resolves no address.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace faultline::symbolize {

namespace internal {
class ModuleData;
class Debuginfod;
}  // namespace internal

// One source position, innermost-first member of an inline chain.
struct SourceLocation {
  std::string function;  // demangled; "" when unknown
  std::string file;      // "" when unknown
  int line = 0;          // 0 when unknown
  int column = 0;        // 0 when unknown
};

// What an address resolves to. `frames` lists the inline chain innermost
// first: front() is the code the address is in (possibly an inlined callee),
// each next one the caller it was inlined into, at the call's position, and
// back() is the function that really exists in the binary. One element when
// nothing was inlined; empty when nothing at all is known.
struct AddressInfo {
  std::vector<SourceLocation> frames;
  // True when DWARF gave the real function (frames.back()) no linkage name
  // and its name was pieced together from the declaration's scopes; the
  // symbol table, when it names the same function, has its full signature.
  bool function_from_scopes = false;
  bool empty() const { return frames.empty(); }
};

// What the call-site record of a call names as the function called (see
// tail_calls.h); known is false when there is no record or it names none
// (an indirect call).
struct CallTarget {
  bool known = false;
  bool has_entry = false;  // the function's code is in the caller's module, at entry
  uint64_t entry = 0;
  std::string name;  // its linkage (or source) name, to find it in another module
};

// A function that a tail call left off the stack.
struct TailCallFrame {
  uint64_t return_address = 0;    // after its jump (gdb's pc of such a frame)
  AddressInfo info;               // what return_address - 1 resolves to
  bool in_caller_module = false;  // in the caller's module, not the callee's
};

// Where a module's debug information came from; the names are the values of
// the report's per-module "debug_source" field.
enum class DebugSource {
  kModule,           // the module file itself has DWARF
  kDebuglink,        // .gnu_debuglink: next to the module or under /usr/lib/debug
  kBuildIdDir,       // /usr/lib/debug/.build-id/xx/rest.debug
  kDebugDir,         // a directory given with --debug-dir
  kDebuginfod,       // a debuginfod server (DEBUGINFOD_URLS)
  kNone,             // no DWARF found: function names from the symbol table at most
  kBuildIdMismatch,  // the file here is another build than the report's: not used
};

const char* to_string(DebugSource source);

// True for the sources that give file and line information.
inline bool has_dwarf(DebugSource s) {
  return s != DebugSource::kNone && s != DebugSource::kBuildIdMismatch;
}

struct SearchOptions {
  // Extra directories (--debug-dir), searched after the system locations.
  std::vector<std::string> debug_dirs;
  // The system's debug root; a test may point it elsewhere.
  std::string system_debug_root = "/usr/lib/debug";
  // Ask a debuginfod server when DEBUGINFOD_URLS is set and nothing local matched.
  bool use_debuginfod = true;
  // Seconds the whole run may wait for debuginfod servers (--network-budget,
  // FAULTLINE_NETWORK_BUDGET); 0 asks none.
  double network_budget_s = 10;
  // The run's fetches, shared by its modules; made on first use when null.
  std::shared_ptr<internal::Debuginfod> debuginfod;
};

class Module {
 public:
  // `expected_build_id` is the lower-case hex build-id the report recorded
  // ("" when unknown). Never throws for bad files; see error().
  static std::unique_ptr<Module> open(const std::string& path, const std::string& expected_build_id,
                                      const SearchOptions& options);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // `address` is an ELF virtual address (the report's module_offset; for a
  // return address the caller subtracts one first).
  AddressInfo lookup(uint64_t address);

  // The call-site record of the call that returns to `return_address`.
  CallTarget call_target(uint64_t return_address);
  // The frames tail calls removed between a call to `call` (the CallTarget
  // of a call in `caller`, this module or another) and this module's code at
  // `callee_address`, innermost first; empty when the call went there
  // directly or the records do not say for certain.
  std::vector<TailCallFrame> tail_calls(const CallTarget& call, Module& caller,
                                        uint64_t callee_address);

  // True when `address` is the first byte of the sigreturn trampoline
  // (glibc's __restore_rt), by the module's symbol tables.
  bool is_sigreturn_trampoline(uint64_t address) const;

  DebugSource debug_source() const;
  // False when neither the module file nor any debug file could be used.
  bool usable() const;
  // True when the DWARF that was found is damaged (lookups give what they can).
  bool damaged() const;
  const std::string& debug_file() const;  // the file DWARF was read from ("" if none)
  const std::string& build_id() const;    // of the file used; "" when none
  // Why the module or its debug info could not be used; "" when all is well.
  // Set also when DWARF was found but is damaged (lookups then give what they can).
  const std::string& error() const;

 private:
  Module();
  std::unique_ptr<internal::ModuleData> data_;
};

// A cache of modules keyed by (path, expected build-id).
class Symbolizer {
 public:
  explicit Symbolizer(SearchOptions options);
  Module& module(const std::string& path, const std::string& expected_build_id);
  // Opens these modules (path, expected build-id), fetching from debuginfod
  // the debug files of all that need it at once, within the network budget.
  void open_all(const std::vector<std::pair<std::string, std::string>>& modules);
  // True when a debuginfod fetch cut off at the budget is still winding down
  // (the process may end without waiting for it).
  bool network_pending() const;
  const SearchOptions& options() const { return options_; }

 private:
  SearchOptions options_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Module>> modules_;
};

}  // namespace faultline::symbolize
