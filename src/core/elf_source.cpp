#include "core/elf_source.h"

namespace faultline::core {

// Finds .symtab and .dynsym (with their string tables), at most two, in that
// order. Returns the count, -1 if `src` is not a 64-bit ELF file.
int find_symtabs(const ElfSource& src, SymTab* out) {
  ElfW(Ehdr) eh;
  if (!src.read(&eh, 0, sizeof eh)) return -1;
  if (eh.e_ident[EI_MAG0] != ELFMAG0 || eh.e_ident[EI_MAG1] != ELFMAG1 ||
      eh.e_ident[EI_MAG2] != ELFMAG2 || eh.e_ident[EI_MAG3] != ELFMAG3 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(ElfW(Shdr))) {
    return -1;
  }
  // One pass over the section headers, 16 per read: a read is a system
  // call (~1.5 us in a virtual machine), and a library has 30 to 70 sections.
  constexpr unsigned kPerRead = 16;
  ElfW(Shdr) chunk[kPerRead];
  ElfW(Shdr) tab[2] = {};  // [0]: .symtab, [1]: .dynsym
  bool have[2] = {false, false};
  unsigned shnum = eh.e_shnum;  // 16 bits: at most 65535
  for (unsigned i = 0; i < shnum && !(have[0] && have[1]); i += kPerRead) {
    unsigned take = shnum - i < kPerRead ? shnum - i : kPerRead;
    if (!src.read(chunk, eh.e_shoff + i * sizeof(ElfW(Shdr)), take * sizeof(ElfW(Shdr)))) break;
    for (unsigned k = 0; k < take; ++k) {
      const ElfW(Shdr)& sh = chunk[k];
      if (sh.sh_entsize != sizeof(ElfW(Sym))) continue;
      int which = sh.sh_type == SHT_SYMTAB ? 0 : sh.sh_type == SHT_DYNSYM ? 1 : -1;
      if (which < 0 || have[which]) continue;
      tab[which] = sh;
      have[which] = true;
    }
  }
  // .symtab first: it is a superset of .dynsym when present.
  int found = 0;
  for (int which = 0; which < 2; ++which) {
    if (!have[which]) continue;
    const ElfW(Shdr)& sh = tab[which];
    ElfW(Shdr) strsh;
    if (sh.sh_link >= shnum ||
        !src.read(&strsh, eh.e_shoff + sh.sh_link * sizeof strsh, sizeof strsh)) {
      continue;
    }
    out[found++] = {sh.sh_offset, sh.sh_size, strsh.sh_offset, strsh.sh_size, &src, which == 0};
  }
  return found;
}

}  // namespace faultline::core
