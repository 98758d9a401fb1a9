// Function symbols of an ELF file sorted by address, for names where DWARF
// has none (assembly, stripped code). Internal to the symbolizer.
#pragma once

#include <libelf.h>

#include <cstdint>
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
  // The symbol covering `address`, or null.
  const char* find(uint64_t address) const;
  // The symbol that starts exactly at `address`, or null.
  const char* starting_at(uint64_t address) const;
  bool empty() const { return symbols_.empty(); }

 private:
  struct Symbol {
    uint64_t address;
    uint64_t size;
    const char* name;
    int rank;  // which of several symbols at one address names it: global > weak > local
  };
  std::vector<Symbol> symbols_;
};

}  // namespace faultline::symbolize::internal
