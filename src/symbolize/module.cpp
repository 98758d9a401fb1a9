// Module: one ELF module, its debug information located once (see
// debug_search.h for the order), then any number of lookups.
#include <elfutils/libdwelf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "core/modules/elf_plt.h"
#include "symbolize/debug_search.h"
#include "symbolize/debuginfod_fetch.h"
#include "symbolize/dwarf_index.h"
#include "symbolize/elf_file.h"
#include "symbolize/symbol_table.h"
#include "symbolize/symbolize.h"
#include "symbolize/tail_calls.h"

namespace faultline::symbolize {

const char* to_string(DebugSource source) {
  switch (source) {
    case DebugSource::kModule:
      return "module";
    case DebugSource::kDebuglink:
      return "debuglink";
    case DebugSource::kBuildIdDir:
      return "build-id-dir";
    case DebugSource::kDebugDir:
      return "debug-dir";
    case DebugSource::kDebuginfod:
      return "debuginfod";
    case DebugSource::kNone:
      return "none";
    case DebugSource::kBuildIdMismatch:
      return "build-id mismatch";
  }
  return "none";
}

namespace internal {

class ModuleData {
 public:
  std::string path;
  std::string build_id;
  std::string debug_file;
  std::string error;
  bool damaged = false;
  DebugSource source = DebugSource::kNone;
  std::unique_ptr<ElfFile> main;  // null when missing or another build
  DebugFile debug;                // debug.file is null when the DWARF is main's own
  DebugFile alt;                  // dwz supplementary file, if any
  Dwarf* own_dwarf = nullptr;     // main's DWARF when source == kModule
  std::unique_ptr<DwarfIndex> index;
  SymbolTable symbols;
  SymbolTable own_symbols;  // main's own table, when `symbols` is the debug file's
  std::map<uint64_t, std::vector<CallSite>> sites_by_entry;  // call sites of functions, by entry

  ~ModuleData() {
    index.reset();
    if (own_dwarf) dwarf_end(own_dwarf);
  }

  void open(const std::string& module_path, const std::string& expected,
            const SearchOptions& options);
  // The entry of the function whose code holds `address`.
  bool entry_of(uint64_t address, uint64_t* entry);
  // The call sites of the function starting at `entry`; null when none starts there.
  const std::vector<CallSite>* sites_of(uint64_t entry);
  // A call site's target entry: from DWARF, or by name from the symbol tables.
  bool resolve(bool has_entry, uint64_t entry, const std::string& name, uint64_t* out) const;
};

bool ModuleData::entry_of(uint64_t address, uint64_t* entry) {
  Dwarf_Die function;
  return index && index->function_die(address, &function) && function_entry(&function, entry);
}

const std::vector<CallSite>* ModuleData::sites_of(uint64_t entry) {
  auto it = sites_by_entry.find(entry);
  if (it == sites_by_entry.end()) {
    Dwarf_Die function;
    uint64_t start = 0;
    std::vector<CallSite> sites;
    if (index && index->function_die(entry, &function) && function_entry(&function, &start) &&
        start == entry)
      sites = call_sites(&function);
    it = sites_by_entry.emplace(entry, std::move(sites)).first;
  }
  return it->second.empty() ? nullptr : &it->second;
}

bool ModuleData::resolve(bool has_entry, uint64_t entry, const std::string& name,
                         uint64_t* out) const {
  if (has_entry) {
    *out = entry;
    return true;
  }
  return !name.empty() && symbols.address_of(name, out);
}

void ModuleData::open(const std::string& module_path, const std::string& expected,
                      const SearchOptions& options) {
  path = module_path;
  std::string open_error;
  int open_errno = 0;
  main = ElfFile::open(path, &open_error, &open_errno);
  bool mismatch = false;
  if (main && !expected.empty() && main->build_id() != expected) {
    // The file here is another build: its lines and names would be wrong.
    mismatch = true;
    error = path + " here has build-id " + (main->build_id().empty() ? "none" : main->build_id()) +
            ", the report's is " + expected;
    main.reset();
  } else if (!main) {
    error = open_error;
  }

  Dwarf* dwarf = nullptr;
  build_id = main ? main->build_id() : expected;
  if (main && main->has_dwarf()) {
    own_dwarf = dwarf_begin_elf(main->elf(), DWARF_C_READ, nullptr);
    if (own_dwarf) {
      source = DebugSource::kModule;
      dwarf = own_dwarf;
      debug_file = path;
    } else {
      error = path + ": unreadable DWARF (" + dwarf_errmsg(-1) + ")";
      damaged = true;
    }
  }
  // Without the module file, only a debug file found by the report's
  // build-id can be trusted; without any build-id there is nothing to match.
  if (dwarf == nullptr && (main || !expected.empty())) {
    SearchRequest request;
    request.module_path = path;
    request.main = main.get();
    request.build_id = build_id;
    std::vector<std::string> notes;
    debug = find_separate_debug(request, options, &notes);
    if (debug.dwarf) {
      source = debug.source;
      dwarf = debug.dwarf;
      debug_file = debug.file->path();
    } else if (!notes.empty() && error.empty()) {
      error = notes.front();
    } else if (!notes.empty() && notes.back().rfind("debuginfod", 0) == 0) {
      error += "; " + notes.back();  // the network's answer, too: why nothing came from there
    }
  }
  if (dwarf) {
    // dwz moves shared DIEs and strings into a supplementary file.
    const char* alt_name = nullptr;
    const void* alt_id = nullptr;
    ssize_t n = dwelf_dwarf_gnu_debugaltlink(dwarf, &alt_name, &alt_id);
    if (n > 0) {
      alt = find_alt_debug(debug_file, alt_name ? alt_name : "",
                           bytes_to_hex(static_cast<const unsigned char*>(alt_id), n), options);
      if (alt.dwarf) {
        dwarf_setalt(dwarf, alt.dwarf);
      } else if (error.empty()) {
        error = debug_file + ": supplementary debug file " + (alt_name ? alt_name : "") +
                " not found; some names may be missing";
      }
    }
    index = std::make_unique<DwarfIndex>(dwarf);
    if (!index->error().empty()) {
      damaged = true;
      if (error.empty()) error = debug_file + ": " + index->error();
    }
  } else if (mismatch) {
    source = DebugSource::kBuildIdMismatch;
  }
  // Names for code DWARF does not describe: the debug file's full .symtab
  // first (stripped modules keep only .dynsym), then the module's own.
  if (debug.file) symbols.add(debug.file->elf());
  if (symbols.empty() && main) symbols.add(main->elf());
  symbols.finish();
  if (debug.file && main && own_symbols.add(main->elf())) own_symbols.finish();
  if (index)
    index->set_symbol_lookup([this](uint64_t entry) { return symbols.starting_at(entry); });
}

}  // namespace internal

namespace {

// A PLT stub of the module file: "strlen@plt", as the crash path and gdb
// name it (core/modules/elf_plt.h); "" when `address` is in none.
std::string plt_stub(const internal::ElfFile& file, uint64_t address) {
  int fd = file.fd();
  char name[1024];
  uint64_t start = 0;
  if (fd < 0 || !core::plt_stub_name({core::read_fd, &fd}, address, name, sizeof name, &start))
    return std::string();
  return name;
}

}  // namespace

Module::Module() : data_(std::make_unique<internal::ModuleData>()) {}
Module::~Module() = default;

std::unique_ptr<Module> Module::open(const std::string& path, const std::string& expected_build_id,
                                     const SearchOptions& options) {
  std::unique_ptr<Module> m(new Module());
  m->data_->open(path, expected_build_id, options);
  return m;
}

AddressInfo Module::lookup(uint64_t address) {
  AddressInfo info;
  auto& d = *data_;
  if (d.index) {
    d.index->lookup(address, &info);
    // Units are indexed on first use: damage may show up only now.
    if (!d.damaged && !d.index->error().empty()) {
      d.damaged = true;
      if (d.error.empty()) d.error = d.debug_file + ": " + d.index->error();
    }
  }
  // Code DWARF says nothing about, or whose function has no DIE: the symbol
  // table still names the function.
  const char* sym = nullptr;
  if (info.frames.empty() || info.frames.back().function.empty()) sym = d.symbols.find(address);
  std::string plt;
  if (!sym && info.frames.empty() && d.main) plt = plt_stub(*d.main, address);
  if (!plt.empty()) {
    info.frames.emplace_back();
    info.frames.back().function = internal::demangle(plt.c_str());
  } else if (sym) {
    if (info.frames.empty()) info.frames.emplace_back();
    info.frames.back().function = internal::demangle(sym);
  } else if (!info.frames.empty() && !info.function_from_scopes &&
             info.frames.back().function.find('(') == std::string::npos) {
    // A C function with several names (glibc: raise, gsignal, __GI_raise),
    // DWARF's among them: the one the module's own symbol table gives its
    // start, the largest there and the last in the table among equals, as
    // llvm-symbolizer names it (clock_gettime's start is __clock_gettime);
    // where that table has none (a local function of a stripped library),
    // DWARF's. The raw report's symbol keeps the crash path's choice.
    uint64_t start = 0;
    std::string& function = info.frames.back().function;
    if (d.symbols.find(address, &start) && d.symbols.has_symbol_at(function, start)) {
      const internal::SymbolTable& own = d.own_symbols.empty() ? d.symbols : d.own_symbols;
      if (const char* s = own.last_largest_at(start)) function = s;
    }
  } else if (info.function_from_scopes) {
    // DWARF had no linkage name for the real function: the symbol table's
    // name of the same function carries the parameter types and the
    // demangler's spelling of lambdas, as the raw report shows it.
    if (const char* s = d.symbols.find(address)) {
      std::string full = internal::without_clone_suffix(internal::demangle(s));
      if (internal::function_base_name(full) ==
          internal::function_base_name(info.frames.back().function))
        info.frames.back().function = std::move(full);
    }
  }
  // A unit covers the address but nothing names it: nothing is known.
  if (info.frames.size() == 1 && info.frames[0].function.empty() && info.frames[0].file.empty() &&
      info.frames[0].line == 0)
    info.frames.clear();
  return info;
}

CallTarget Module::call_target(uint64_t return_address) {
  CallTarget target;
  auto& d = *data_;
  uint64_t entry = 0;
  if (return_address == 0 || !d.entry_of(return_address - 1, &entry)) return target;
  const std::vector<internal::CallSite>* sites = d.sites_of(entry);
  if (sites == nullptr) return target;
  for (const internal::CallSite& site : *sites) {
    if (site.return_pc != return_address || site.tail) continue;
    target.known = site.has_entry || !site.target_name.empty();
    target.has_entry = site.has_entry;
    target.entry = site.entry;
    target.name = site.target_name;
    break;
  }
  return target;
}

std::vector<TailCallFrame> Module::tail_calls(const CallTarget& call, Module& caller,
                                              uint64_t callee_address) {
  // Functions of both modules take part when the caller's module is
  // another (a program's function tail-calling into libc): this module's
  // entries and return addresses carry kHere, the caller's none.
  constexpr uint64_t kHere = 1ull << 63;
  internal::ModuleData& here = *data_;
  internal::ModuleData& there = *caller.data_;
  const bool same = &here == &there;
  const uint64_t tag = same ? 0 : kHere;
  auto module_of = [&](uint64_t tagged) -> internal::ModuleData& {
    return (tagged & kHere) || same ? here : there;
  };
  // A target named in `from`: defined there, else (from the caller's
  // module) in this one, as the dynamic linker would bind it.
  auto resolve = [&](internal::ModuleData& from, bool has_entry, uint64_t entry,
                     const std::string& name, uint64_t* out) {
    uint64_t from_tag = &from == &here ? tag : 0;
    if (from.resolve(has_entry, entry, name, out)) {
      *out |= from_tag;
      return true;
    }
    if (&from == &here || !here.resolve(false, 0, name, out)) return false;
    *out |= tag;
    return true;
  };
  std::vector<TailCallFrame> out;
  uint64_t first = 0, callee = 0;
  if (!call.known || !here.entry_of(callee_address, &callee) ||
      !resolve(there, call.has_entry, call.entry, call.name, &first))
    return out;
  callee |= tag;
  std::map<uint64_t, std::vector<internal::CallSite>> tagged;  // this module's sites, tagged
  auto chain = internal::tail_call_chain(
      first, callee,
      [&](uint64_t entry) -> const std::vector<internal::CallSite>* {
        const auto* sites = module_of(entry).sites_of(entry & ~kHere);
        if (sites == nullptr || !(entry & kHere) || same) return sites;
        auto [it, fresh] = tagged.try_emplace(entry);
        if (fresh) {
          it->second = *sites;
          for (auto& site : it->second) site.return_pc |= kHere;
        }
        return &it->second;
      },
      [&](const internal::CallSite& site, uint64_t* entry) {
        return resolve(module_of(site.return_pc), site.has_entry, site.entry, site.target_name,
                       entry);
      });
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    uint64_t pc = it->return_pc & ~kHere;
    if (pc == 0) return {};
    bool in_caller = !same && !(it->return_pc & kHere);
    Module& m = in_caller ? caller : *this;
    out.push_back({pc, m.lookup(pc - 1), in_caller});
  }
  return out;
}

bool Module::is_sigreturn_trampoline(uint64_t address) const {
  const char* name = data_->symbols.starting_at(address);
  return name != nullptr && std::strcmp(name, "__restore_rt") == 0;
}

DebugSource Module::debug_source() const {
  return data_->source;
}
bool Module::damaged() const {
  return data_->damaged;
}
bool Module::usable() const {
  return data_->main != nullptr || data_->index != nullptr;
}
const std::string& Module::debug_file() const {
  return data_->debug_file;
}
const std::string& Module::build_id() const {
  return data_->build_id;
}
const std::string& Module::error() const {
  return data_->error;
}

Symbolizer::Symbolizer(SearchOptions options) : options_(std::move(options)) {
  if (!options_.debuginfod)
    options_.debuginfod = std::make_shared<internal::Debuginfod>(options_.network_budget_s);
}

void Symbolizer::open_all(const std::vector<std::pair<std::string, std::string>>& modules) {
  internal::Debuginfod& net = *options_.debuginfod;
  net.set_deferring(true);
  for (const auto& [path, build_id] : modules) module(path, build_id);
  net.set_deferring(false);
  std::vector<std::string> wanted = net.take_deferred();
  if (wanted.empty()) return;
  net.fetch(wanted);
  // Open again, with the answers, the modules that were waiting for them.
  for (auto it = modules_.begin(); it != modules_.end();) {
    const Module& m = *it->second;
    bool waited = std::find(wanted.begin(), wanted.end(), m.build_id()) != wanted.end();
    it = waited && !has_dwarf(m.debug_source()) ? modules_.erase(it) : std::next(it);
  }
  for (const auto& [path, build_id] : modules) module(path, build_id);
}

bool Symbolizer::network_pending() const {
  return options_.debuginfod && options_.debuginfod->pending();
}

Module& Symbolizer::module(const std::string& path, const std::string& expected_build_id) {
  auto key = std::make_pair(path, expected_build_id);
  auto it = modules_.find(key);
  if (it == modules_.end())
    it = modules_.emplace(std::move(key), Module::open(path, expected_build_id, options_)).first;
  return *it->second;
}

}  // namespace faultline::symbolize
