#include "symbolize/dwarf_index.h"

#include <cxxabi.h>
#include <dwarf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <queue>
#include <string_view>

#include "symbolize/tail_calls.h"

namespace faultline::symbolize::internal {
namespace {

// DIE trees deeper than this are not real programs (GCC and Clang stay far
// below 64 even for heavily templated code); stopping bounds the recursion on
// damaged or hostile input.
constexpr int kMaxDepth = 256;
// Ranges per DIE beyond this are treated as damage, for the same reason.
constexpr int kMaxRangesPerDie = 1 << 16;

// Visits each [low, high) range of `die`. Returns false on a DWARF error.
template <typename F>
bool for_each_range(Dwarf_Die* die, F&& f) {
  Dwarf_Addr base = 0, low = 0, high = 0;
  ptrdiff_t off = 0;
  for (int n = 0; n < kMaxRangesPerDie; ++n) {
    off = dwarf_ranges(die, off, &base, &low, &high);
    if (off == 0) return true;
    if (off < 0) return false;
    if (high > low) f(low, high);
  }
  return false;
}

// Tags whose children may hold code: the scopes of functions and the
// containers (namespaces, classes) that definitions can sit in.
bool may_contain_code(int tag) {
  switch (tag) {
    case DW_TAG_namespace:
    case DW_TAG_class_type:
    case DW_TAG_structure_type:
    case DW_TAG_union_type:
    case DW_TAG_lexical_block:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
    case DW_TAG_module:
      return true;
    default:
      return false;
  }
}

int attr_int(Dwarf_Die* die, int name) {
  Dwarf_Attribute attr;
  Dwarf_Word value = 0;
  if (dwarf_attr(die, name, &attr) == nullptr || dwarf_formudata(&attr, &value) != 0) return 0;
  return value > 0x7fffffff ? 0 : static_cast<int>(value);
}

}  // namespace

const char* attr_string(Dwarf_Die* die, int name) {
  Dwarf_Attribute attr;
  if (dwarf_attr_integrate(die, name, &attr) == nullptr) return nullptr;
  return dwarf_formstring(&attr);
}

std::string demangle(const char* name) {
  if (name == nullptr) return std::string();
  if (name[0] != '_' || name[1] != 'Z') return name;
  // A PLT stub's "_Znwm@plt": the function's name and the suffix, as gdb
  // prints it ("operator new(unsigned long)@plt").
  std::string_view whole(name);
  if (whole.size() > 4 && whole.substr(whole.size() - 4) == "@plt")
    return demangle(std::string(whole.substr(0, whole.size() - 4)).c_str()) + "@plt";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string s(out);
  free(out);
  return s;
}

std::string without_clone_suffix(std::string name) {
  for (;;) {
    size_t at = name.rfind(" [clone ");
    if (at == std::string::npos || name.back() != ']') return name;
    name.resize(at);
  }
}

std::string function_base_name(const std::string& name) {
  // Walk the top level (outside <>, (), [] and {}), remembering where the
  // last scope separator is and where the parameter list starts.
  size_t start = 0, end = name.size();
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (depth == 0 && name.compare(i, 8, "operator") == 0) {
      // The operator's own characters ("()", "<<", "<") are part of its name.
      size_t j = i + 8;
      if (name.compare(j, 2, "()") == 0) {
        j += 2;
      } else {
        while (j < name.size() && std::strchr("+-*/%^&|~!=<>,[]", name[j]) != nullptr) ++j;
      }
      i = j - 1;
      continue;
    }
    if (name.compare(i, 21, "(anonymous namespace)") == 0) {
      i += 20;
      continue;
    }
    if (c == '<' || c == '(' || c == '[' || c == '{') {
      if (depth == 0 && c == '(') {
        // The parameter list, unless a scope follows it: a function-local
        // entity ("f(int)::{lambda()#1}::operator()()").
        size_t close = i;
        for (int d = 0; close < name.size(); ++close) {
          if (name[close] == '(') ++d;
          if (name[close] == ')' && --d == 0) break;
        }
        if (close >= name.size() || name.compare(close + 1, 2, "::") != 0) {
          end = i;
          break;
        }
        i = close;
        continue;
      }
      ++depth;
    } else if ((c == '>' || c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (depth == 0 && c == ':' && i + 1 < name.size() && name[i + 1] == ':') {
      start = i + 2;
      ++i;
    } else if (depth == 0 && c == ' ') {
      start = i + 1;  // a return type before the name
    }
  }
  std::string base = name.substr(start, end - start);
  // Template arguments of the function itself ("sum<double>") are not part
  // of its base name; an operator's "<" is.
  if (base.compare(0, 8, "operator") != 0) {
    size_t lt = base.find('<');
    if (lt != std::string::npos) base.resize(lt);
  }
  return base;
}

void IntervalMap::build(std::vector<Range> ranges) {
  starts_.clear();
  values_.clear();
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.low < b.low; });
  std::vector<uint64_t> points;
  points.reserve(ranges.size() * 2);
  for (const auto& r : ranges) {
    points.push_back(r.low);
    points.push_back(r.high);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());

  // Sweep the boundaries left to right, keeping the ranges that have started
  // in a heap ordered by priority; ended ones are dropped lazily when they
  // reach the top. Among equal priorities the later-starting range wins,
  // which is the inner one for properly nested input.
  auto lower = [](const std::pair<int, size_t>& a, const std::pair<int, size_t>& b) {
    return a < b;
  };
  std::priority_queue<std::pair<int, size_t>, std::vector<std::pair<int, size_t>>, decltype(lower)>
      active(lower);
  size_t next = 0;
  for (uint64_t p : points) {
    while (next < ranges.size() && ranges[next].low == p) {
      active.push({ranges[next].priority, next});
      ++next;
    }
    while (!active.empty() && ranges[active.top().second].high <= p) active.pop();
    int value = active.empty() ? -1 : ranges[active.top().second].value;
    if (values_.empty() || values_.back() != value) {
      starts_.push_back(p);
      values_.push_back(value);
    }
  }
}

int IntervalMap::find(uint64_t address) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), address);
  if (it == starts_.begin()) return -1;
  return values_[static_cast<size_t>(it - starts_.begin()) - 1];
}

DwarfIndex::DwarfIndex(Dwarf* dwarf) : dwarf_(dwarf) {
  std::vector<IntervalMap::Range> ranges;
  Dwarf_CU* cu = nullptr;
  Dwarf_CU* next = nullptr;
  Dwarf_Half version = 0;
  uint8_t unit_type = 0;
  Dwarf_Die cudie, subdie;
  for (;;) {
    int rc = dwarf_get_units(dwarf_, cu, &next, &version, &unit_type, &cudie, &subdie);
    if (rc != 0) {
      if (rc < 0) note("unit list damaged: " + std::string(dwarf_errmsg(-1)));
      break;
    }
    cu = next;
    // Only compile units hold code; type and partial units are reached
    // through references when a name needs them.
    if (unit_type != DW_UT_compile || dwarf_tag(&cudie) != DW_TAG_compile_unit) continue;
    int index = static_cast<int>(units_.size());
    bool any = false;
    if (!for_each_range(&cudie, [&](uint64_t lo, uint64_t hi) {
          ranges.push_back({lo, hi, index, 0});
          any = true;
        }))
      note("compile unit ranges damaged");
    // Units without ranges stay reachable through .debug_aranges (below).
    Unit unit;
    unit.die = cudie;
    unit_by_offset_.emplace(dwarf_dieoffset(&cudie), units_.size());
    units_.push_back(std::move(unit));
    if (!any) ++units_without_ranges_;
  }
  unit_map_.build(std::move(ranges));
}

void DwarfIndex::note(const std::string& what) {
  if (error_.empty()) error_ = what;
}

void DwarfIndex::collect(Unit& unit, Dwarf_Die* parent_die, int parent_scope, int depth,
                         std::vector<IntervalMap::Range>* ranges) {
  if (depth > kMaxDepth) {
    note("DIE tree nested too deeply");
    return;
  }
  Dwarf_Die child;
  int rc = dwarf_child(parent_die, &child);
  while (rc == 0) {
    int tag = dwarf_tag(&child);
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
      int index = static_cast<int>(unit.scopes.size());
      bool any = false;
      // A subprogram nested in another (a local class's method, a GNU C
      // nested function) starts a new chain; only inlining links to a parent.
      unit.scopes.push_back({child, tag == DW_TAG_inlined_subroutine ? parent_scope : -1});
      if (!for_each_range(&child, [&](uint64_t lo, uint64_t hi) {
            ranges->push_back({lo, hi, index, depth});
            any = true;
          }))
        note("function ranges damaged");
      if (any) {
        collect(unit, &child, index, depth + 1, ranges);
      } else {
        unit.scopes.pop_back();  // a declaration or abstract instance: no code here
      }
    } else if (may_contain_code(tag)) {
      collect(unit, &child, parent_scope, depth + 1, ranges);
    }
    rc = dwarf_siblingof(&child, &child);
  }
  if (rc < 0) note("DIE tree damaged: " + std::string(dwarf_errmsg(-1)));
}

void DwarfIndex::index_unit(Unit& unit) {
  unit.indexed = true;
  std::vector<IntervalMap::Range> ranges;
  collect(unit, &unit.die, -1, 1, &ranges);
  unit.map.build(std::move(ranges));
  if (dwarf_getsrcfiles(&unit.die, &unit.files, &unit.nfiles) != 0) {
    unit.files = nullptr;
    unit.nfiles = 0;
  }
  Dwarf_Attribute attr;
  if (dwarf_attr(&unit.die, DW_AT_comp_dir, &attr))
    if (const char* dir = dwarf_formstring(&attr)) unit.comp_dir = dir;
}

// Line tables may name files relative to the compilation directory (builds
// with -fdebug-prefix-map do); joined with it the way eu-addr2line and
// llvm-symbolizer print them, so all three tools show the same path.
std::string DwarfIndex::full_path(const Unit& unit, const char* name) {
  if (name[0] == '/' || unit.comp_dir.empty()) return name;
  return unit.comp_dir + "/" + name;
}

const std::string& DwarfIndex::name_of(Dwarf_Die* die, bool* from_scopes) {
  Dwarf_Off key = dwarf_dieoffset(die);
  auto it = names_.find(key);
  if (it == names_.end()) {
    // A C++ function by its demangled linkage name (qualified, with parameter
    // types, as llvm-symbolizer and addr2line -C print it); anything else by
    // its source name: C code may carry an assembler alias as linkage name
    // (glibc's __GI___libc_malloc for __libc_malloc). Both follow
    // DW_AT_abstract_origin and DW_AT_specification. A C++ function without
    // a linkage name (GCC omits it for its lambdas, for members of templates
    // instantiated with local types, std::function's _M_invoke of a lambda)
    // is spelt as the demangled symbol of an out-of-line copy of it, so that
    // its inlined and out-of-line frames, raw and symbolized, read alike;
    // with no such copy, by the scopes of its declaration, as gdb does.
    const char* linkage = attr_string(die, DW_AT_linkage_name);
    if (linkage == nullptr) linkage = attr_string(die, DW_AT_MIPS_linkage_name);
    Name name;
    if (linkage && linkage[0] == '_' && linkage[1] == 'Z') name.text = demangle(linkage);
    if (name.text.empty() && is_cplusplus(die)) {
      name.text = symbol_spelling(die);
      if (name.text.empty()) {
        name.text = scoped_name(die);
        name.from_scopes = !name.text.empty();
      }
    }
    if (name.text.empty()) {
      const char* plain = attr_string(die, DW_AT_name);
      if (plain) name.text = plain;
    }
    it = names_.emplace(key, std::move(name)).first;
  }
  if (from_scopes) *from_scopes = it->second.from_scopes;
  return it->second.text;
}

bool DwarfIndex::is_cplusplus(Dwarf_Die* die) {
  Dwarf_Die cu;
  if (dwarf_diecu(die, &cu, nullptr, nullptr) == nullptr) return false;
  switch (dwarf_srclang(&cu)) {
    case DW_LANG_C_plus_plus:
    case DW_LANG_C_plus_plus_03:
    case DW_LANG_C_plus_plus_11:
    case DW_LANG_C_plus_plus_14:
      return true;
    default:
      return false;
  }
}

Dwarf_Die declaration_of(Dwarf_Die* die) {
  Dwarf_Die decl = *die;
  for (int hops = 0; hops < 8; ++hops) {
    Dwarf_Attribute attr;
    Dwarf_Die next;
    if (dwarf_attr(&decl, DW_AT_abstract_origin, &attr) == nullptr &&
        dwarf_attr(&decl, DW_AT_specification, &attr) == nullptr)
      break;
    if (dwarf_formref_die(&attr, &next) == nullptr) break;
    decl = next;
  }
  return decl;
}

std::string DwarfIndex::symbol_spelling(Dwarf_Die* die) {
  if (!symbol_at_) return std::string();
  Dwarf_Die decl = declaration_of(die);
  const char* own = dwarf_diename(&decl);
  Dwarf_Die cu;
  if (own == nullptr || dwarf_diecu(die, &cu, nullptr, nullptr) == nullptr) return std::string();
  auto u = unit_by_offset_.find(dwarf_dieoffset(&cu));
  if (u == unit_by_offset_.end()) return std::string();
  Unit& unit = units_[u->second];
  if (!unit.indexed) index_unit(unit);
  if (!unit.entries_built) {
    unit.entries_built = true;
    for (Scope& scope : unit.scopes) {
      uint64_t entry = 0;
      if (scope.parent >= 0 || dwarf_tag(&scope.die) != DW_TAG_subprogram ||
          !function_entry(&scope.die, &entry))
        continue;
      Dwarf_Die its = declaration_of(&scope.die);
      unit.entries_by_decl.emplace(dwarf_dieoffset(&its), entry);
    }
  }
  // The copy's symbol must name the same function: GCC and Clang put a
  // lambda's copies in its function's unit, and a symbol at the entry of a
  // function is its own, but a clone or an alias could still differ.
  std::string base = function_base_name(own);
  auto copies = unit.entries_by_decl.equal_range(dwarf_dieoffset(&decl));
  for (auto it = copies.first; it != copies.second; ++it) {
    const char* symbol = symbol_at_(it->second);
    if (symbol == nullptr || symbol[0] != '_' || symbol[1] != 'Z') continue;
    std::string full = without_clone_suffix(demangle(symbol));
    if (full != symbol && function_base_name(full) == base) return full;
  }
  return std::string();
}

std::string DwarfIndex::scoped_name(Dwarf_Die* die) {
  // The declaration carries the name and sits in the scopes: follow the
  // abstract origin (inlined and out-of-line copies) and the specification
  // (an out-of-class definition) to it.
  Dwarf_Die decl = declaration_of(die);
  const char* own = dwarf_diename(&decl);
  if (own == nullptr) return std::string();
  Dwarf_Die* scopes = nullptr;
  int n = dwarf_getscopes_die(&decl, &scopes);
  std::string prefix;
  // scopes[0] is the declaration itself, scopes[n - 1] its unit.
  for (int i = n - 2; i >= 1 && i < kMaxDepth; --i) {
    Dwarf_Die* scope = &scopes[i];
    const char* scope_name = dwarf_diename(scope);
    switch (dwarf_tag(scope)) {
      case DW_TAG_namespace:
        prefix += scope_name ? scope_name : "(anonymous namespace)";
        prefix += "::";
        break;
      case DW_TAG_class_type:
      case DW_TAG_structure_type:
        // GCC leaves a lambda's closure type unnamed; it spells it
        // <lambda(...)> in other names.
        prefix += scope_name ? scope_name : "<lambda>";
        prefix += "::";
        break;
      case DW_TAG_union_type:
        prefix += scope_name ? scope_name : "(anonymous union)";
        prefix += "::";
        break;
      case DW_TAG_subprogram:
        // A function-local class: the function's own name holds its scopes.
        prefix = name_of(scope, nullptr) + "::";
        break;
      default:
        break;  // lexical blocks and the like add no name
    }
  }
  free(scopes);
  return prefix + own;
}

DwarfIndex::Unit* DwarfIndex::unit_at(uint64_t address) {
  int u = unit_map_.find(address);
  if (u < 0 && units_without_ranges_ > 0) {
    // Some producers give a unit no ranges of its own but list it in
    // .debug_aranges.
    Dwarf_Die cu;
    if (dwarf_addrdie(dwarf_, address, &cu) != nullptr) {
      auto it = unit_by_offset_.find(dwarf_dieoffset(&cu));
      if (it != unit_by_offset_.end()) u = static_cast<int>(it->second);
    }
  }
  if (u < 0) return nullptr;
  Unit& unit = units_[static_cast<size_t>(u)];
  if (!unit.indexed) index_unit(unit);
  return &unit;
}

bool DwarfIndex::function_die(uint64_t address, Dwarf_Die* out) {
  Unit* unit = unit_at(address);
  if (unit == nullptr) return false;
  int s = unit->map.find(address);
  for (int guard = 0; s >= 0 && guard <= kMaxDepth; ++guard) {
    const Scope& scope = unit->scopes[static_cast<size_t>(s)];
    if (scope.parent < 0) {
      *out = scope.die;
      return dwarf_tag(out) == DW_TAG_subprogram;
    }
    s = scope.parent;
  }
  return false;
}

bool DwarfIndex::lookup(uint64_t address, AddressInfo* out) {
  Unit* found = unit_at(address);
  if (found == nullptr) return false;
  Unit& unit = *found;

  SourceLocation loc;
  if (Dwarf_Line* line = dwarf_getsrc_die(&unit.die, address)) {
    if (const char* file = dwarf_linesrc(line, nullptr, nullptr)) loc.file = full_path(unit, file);
    dwarf_lineno(line, &loc.line);
    dwarf_linecol(line, &loc.column);
  }
  int s = unit.map.find(address);
  if (s < 0) {
    out->frames.push_back(std::move(loc));  // code without a function DIE: caller names it
    return true;
  }
  // Innermost scope first; each inlined scope's call site is the position
  // in the scope it was inlined into.
  int guard = 0;
  for (; s >= 0 && guard <= kMaxDepth; s = unit.scopes[static_cast<size_t>(s)].parent, ++guard) {
    Dwarf_Die die = unit.scopes[static_cast<size_t>(s)].die;
    bool from_scopes = false;
    loc.function = name_of(&die, &from_scopes);
    out->frames.push_back(loc);
    if (dwarf_tag(&die) != DW_TAG_inlined_subroutine) {
      out->function_from_scopes = from_scopes;
      break;
    }
    loc = SourceLocation();
    size_t file = static_cast<size_t>(attr_int(&die, DW_AT_call_file));
    if (unit.files && file < unit.nfiles) {
      const char* name = dwarf_filesrc(unit.files, file, nullptr, nullptr);
      if (name && std::strcmp(name, "???") != 0) loc.file = full_path(unit, name);
    }
    loc.line = attr_int(&die, DW_AT_call_line);
    loc.column = attr_int(&die, DW_AT_call_column);
  }
  return true;
}

}  // namespace faultline::symbolize::internal
