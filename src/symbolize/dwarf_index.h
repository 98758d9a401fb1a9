// Address lookups in one module's DWARF, built for many lookups per module:
// the compile units' address ranges are read once into a sorted map, and a
// unit's functions and inlined calls are indexed the first time an address
// falls into that unit. A lookup is then two binary searches plus the line
// table search libdw caches per unit, instead of a walk over the unit's DIE
// tree per address. Internal to the symbolizer.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "symbolize/symbolize.h"

namespace faultline::symbolize::internal {

// Non-overlapping segments built from possibly nested ranges: each point gets
// the value of the range with the highest priority that covers it (for
// nested scopes: the deepest one).
class IntervalMap {
 public:
  struct Range {
    uint64_t low, high;  // [low, high)
    int value;
    int priority;
  };
  void build(std::vector<Range> ranges);
  // The value covering `address`, or -1.
  int find(uint64_t address) const;
  size_t size() const { return starts_.size(); }

 private:
  std::vector<uint64_t> starts_;
  std::vector<int> values_;  // values_[i] holds on [starts_[i], starts_[i+1]); -1 = gap
};

class DwarfIndex {
 public:
  // `dwarf` must outlive the index.
  explicit DwarfIndex(Dwarf* dwarf);
  // Fills `out` (innermost first) with what DWARF knows about `address`:
  // function names from subprograms and inlined subroutines, file and line
  // from the line table. Returns false when no compile unit covers it.
  bool lookup(uint64_t address, AddressInfo* out);
  // The out-of-line function (DW_TAG_subprogram) whose code holds
  // `address`, inlined calls looked through; false when none does.
  bool function_die(uint64_t address, Dwarf_Die* out);
  // Damage met while indexing (kept short); "" when none.
  const std::string& error() const { return error_; }
  // The (mangled) symbol-table name of the function starting exactly at an
  // address, or null. With it a C++ function DWARF gives no linkage name (a
  // lambda of GCC's, inlined or not) is spelt as the demangled symbol of an
  // out-of-line copy of it, the spelling the raw report and c++filt show.
  using SymbolAt = std::function<const char*(uint64_t)>;
  void set_symbol_lookup(SymbolAt symbol_at) { symbol_at_ = std::move(symbol_at); }

 private:
  struct Scope {
    Dwarf_Die die;
    int parent;  // enclosing scope in the same inline chain, -1 at the subprogram
  };
  struct Unit {
    Dwarf_Die die;
    bool indexed = false;
    std::vector<Scope> scopes;
    IntervalMap map;
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    std::string comp_dir;
    // The entries of the unit's out-of-line functions by the offset of
    // their declaration; filled the first time a name needs them.
    bool entries_built = false;
    std::unordered_multimap<Dwarf_Off, uint64_t> entries_by_decl;
  };

  // The unit covering `address`, indexed; null when none does.
  Unit* unit_at(uint64_t address);
  void index_unit(Unit& unit);
  void collect(Unit& unit, Dwarf_Die* parent_die, int parent_scope, int depth,
               std::vector<IntervalMap::Range>* ranges);
  // The function's name (see the .cpp); *from_scopes says it was pieced
  // together from the declaration's scopes (no linkage name).
  const std::string& name_of(Dwarf_Die* die, bool* from_scopes);
  std::string scoped_name(Dwarf_Die* die);
  // The demangled symbol of an out-of-line copy of the function declared
  // where `die` points; "" when there is none (see set_symbol_lookup).
  std::string symbol_spelling(Dwarf_Die* die);
  static bool is_cplusplus(Dwarf_Die* die);
  static std::string full_path(const Unit& unit, const char* name);
  void note(const std::string& what);

  Dwarf* dwarf_;
  std::vector<Unit> units_;
  IntervalMap unit_map_;
  std::unordered_map<Dwarf_Off, size_t> unit_by_offset_;
  size_t units_without_ranges_ = 0;
  struct Name {
    std::string text;
    bool from_scopes = false;
  };
  std::unordered_map<Dwarf_Off, Name> names_;  // by DIE offset, demangled
  std::string error_;
  SymbolAt symbol_at_;
};

// The declaration that `die` (an inlined or out-of-line copy, an
// out-of-class definition) refers to through DW_AT_abstract_origin and
// DW_AT_specification; `die` itself when it refers to none.
Dwarf_Die declaration_of(Dwarf_Die* die);

// A string attribute of `die`, following DW_AT_abstract_origin and
// DW_AT_specification; null when absent.
const char* attr_string(Dwarf_Die* die, int name);

// Demangles an Itanium C++ name ("_ZN3foo3barEi" -> "foo::bar(int)"); other
// names come back unchanged.
std::string demangle(const char* name);

// "f(int) [clone .cold] [clone .part.0]" -> "f(int)".
std::string without_clone_suffix(std::string name);

// The function's own name in a qualified, possibly demangled name, without
// scopes, template arguments or parameters: "ns::C<int>::f<double>(int) const"
// -> "f", "main::{lambda(T&)#1}::operator()(T&) const" -> "operator()".
std::string function_base_name(const std::string& name);

}  // namespace faultline::symbolize::internal
