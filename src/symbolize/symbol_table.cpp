#include "symbolize/symbol_table.h"

#include <gelf.h>

#include <algorithm>
#include <cstring>

#include "core/modules/symbol_rank.h"

namespace faultline::symbolize::internal {
namespace {

Elf_Scn* find_section(Elf* elf, Elf64_Word type) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr && shdr.sh_type == type) return scn;
  }
  return nullptr;
}

}  // namespace

bool SymbolTable::add(Elf* elf) {
  Elf_Scn* scn = find_section(elf, SHT_SYMTAB);
  if (scn == nullptr) scn = find_section(elf, SHT_DYNSYM);
  if (scn == nullptr) return false;
  GElf_Shdr shdr;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (gelf_getshdr(scn, &shdr) == nullptr || data == nullptr || shdr.sh_entsize == 0) return false;
  size_t count = data->d_size / shdr.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) break;
    int type = GELF_ST_TYPE(sym.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
        sym.st_value == 0)
      continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (name == nullptr || *name == '\0') continue;
    // A debug file's .symtab spells versioned symbols "clock_gettime@@GLIBC_2.17".
    if (const char* at = std::strchr(name, '@')) {
      if (at == name) continue;
      unversioned_.emplace_back(name, static_cast<size_t>(at - name));
      name = unversioned_.back().c_str();
    }
    // An unsized symbol (`_init`) covers code up to the next symbol, and
    // never past its own section (not the PLT after .init), as gdb has it.
    uint64_t limit = UINT64_MAX;
    GElf_Shdr sec;
    if (sym.st_size == 0) {
      Elf_Scn* in = sym.st_shndx < SHN_LORESERVE ? elf_getscn(elf, sym.st_shndx) : nullptr;
      limit = in && gelf_getshdr(in, &sec) ? sec.sh_addr + sec.sh_size : sym.st_value;
    }
    symbols_.push_back({sym.st_value, sym.st_size, name,
                        core::symbol_binding_rank(GELF_ST_BIND(sym.st_info)), limit});
    auto [it, added] = last_largest_.try_emplace(sym.st_value, sym.st_size, name);
    if (!added && sym.st_size >= it->second.first) it->second = {sym.st_size, name};
  }
  return true;
}

void SymbolTable::finish() {
  for (const Symbol& s : symbols_) by_name_.emplace(s.name, s.address);
  // By address; at one address the best-ranked (and then the sized) first,
  // and among equals the first in the table, as the crash path picks.
  std::stable_sort(symbols_.begin(), symbols_.end(), [](const Symbol& a, const Symbol& b) {
    if (a.address != b.address) return a.address < b.address;
    if (a.rank != b.rank) return a.rank > b.rank;
    return (a.size != 0) > (b.size != 0);
  });
  symbols_.erase(
      std::unique(symbols_.begin(), symbols_.end(),
                  [](const Symbol& a, const Symbol& b) { return a.address == b.address; }),
      symbols_.end());
}

bool SymbolTable::has_symbol_at(const std::string& name, uint64_t address) const {
  auto range = by_name_.equal_range(name);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second == address) return true;
  return false;
}

bool SymbolTable::address_of(const std::string& name, uint64_t* address) const {
  auto range = by_name_.equal_range(name);
  if (range.first == range.second) return false;
  for (auto it = range.first; it != range.second; ++it)
    if (it->second != range.first->second) return false;
  *address = range.first->second;
  return true;
}

const char* SymbolTable::find(uint64_t address, uint64_t* start) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                             [](uint64_t a, const Symbol& s) { return a < s.address; });
  if (it == symbols_.begin()) return nullptr;
  const Symbol& s = *--it;
  // A sized symbol covers [address, address+size); an unsized one (some
  // assembly) covers up to the next symbol, within its section.
  if (s.size != 0 && address - s.address >= s.size) return nullptr;
  if (s.size == 0 && address >= s.limit) return nullptr;
  if (start) *start = s.address;
  return s.name;
}

const char* SymbolTable::starting_at(uint64_t address) const {
  auto it = std::lower_bound(symbols_.begin(), symbols_.end(), address,
                             [](const Symbol& s, uint64_t a) { return s.address < a; });
  return it != symbols_.end() && it->address == address ? it->name : nullptr;
}

const char* SymbolTable::last_largest_at(uint64_t address) const {
  auto it = last_largest_.find(address);
  return it != last_largest_.end() ? it->second.second : nullptr;
}

}  // namespace faultline::symbolize::internal
