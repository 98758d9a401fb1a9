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
  int found = 0;
  // .symtab first: it is a superset of .dynsym when present.
  static const uint32_t kWanted[] = {SHT_SYMTAB, SHT_DYNSYM};
  for (uint32_t want : kWanted) {
    for (unsigned i = 0; i < eh.e_shnum && i < 65536; ++i) {
      ElfW(Shdr) sh;
      if (!src.read(&sh, eh.e_shoff + i * sizeof sh, sizeof sh)) return found;
      if (sh.sh_type != want || sh.sh_entsize != sizeof(ElfW(Sym))) continue;
      ElfW(Shdr) strsh;
      if (sh.sh_link >= eh.e_shnum ||
          !src.read(&strsh, eh.e_shoff + sh.sh_link * sizeof strsh, sizeof strsh)) {
        continue;
      }
      out[found++] = {sh.sh_offset,  sh.sh_size, strsh.sh_offset,
                      strsh.sh_size, &src,       want == SHT_SYMTAB};
      break;
    }
  }
  return found;
}

}  // namespace faultline::core
