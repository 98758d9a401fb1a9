// Function symbols of an ELF file sorted by address, for names where DWARF
// has none (assembly, stripped code). Internal to the symbolizer.
#pragma once

#include <libelf.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace faultline::symbolize::internal {

class SymbolTable {
 public:
  // Adds the function symbols of `elf`'s .symtab, or of .dynsym when it has
  // no .symtab. Names point into `elf`'s data: it must outlive the table.
  // Returns false when the file has neither.
  bool add(Elf* elf);
  // Sorts and removes duplicates; call once after the last add().
  void finish();
  // The symbol covering `address`, or null; *start (when given) receives its address.
  const char* find(uint64_t address, uint64_t* start = nullptr) const;
  // True when a function symbol named `name` starts at `address`.
  bool has_symbol_at(const std::string& name, uint64_t address) const;
  // The one address the function symbols named `name` give; false when no
  // symbol or several at different addresses (local functions of one name).
  bool address_of(const std::string& name, uint64_t* address) const;
  // The symbol that starts exactly at `address`, or null.
  const char* starting_at(uint64_t address) const;
  // Of the symbols that start at `address`, the largest, and among those the
  // last in the table (the alias llvm-symbolizer names), or null.
  const char* last_largest_at(uint64_t address) const;
  bool empty() const { return symbols_.empty(); }

 private:
  struct Symbol {
    uint64_t address;
    uint64_t size;
    const char* name;
    int rank;        // which of several symbols at one address names it: global > weak > local
    uint64_t limit;  // an unsized symbol covers nothing from here on: its section's end
  };
  std::vector<Symbol> symbols_;
  std::deque<std::string> unversioned_;  // "f" for a .symtab's "f@@VERSION"
  std::unordered_multimap<std::string_view, uint64_t> by_name_;
  std::unordered_map<uint64_t, std::pair<uint64_t, const char*>> last_largest_;  // size, name
};

}  // namespace faultline::symbolize::internal
