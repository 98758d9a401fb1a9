// A module's ELF file as the symbol readers see it: bytes by pread(2) from
// the file, or through the SafeReader from the loaded image (the vDSO), and
// its symbol tables. Async-signal-safe.
#pragma once

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "core/base/safe_read.h"
#include "core/modules/elf_plt.h"

namespace faultline::core {

// A 64-bit ELF header: its magic and class.
inline bool is_elf64(const ElfW(Ehdr) & eh) {
  return eh.e_ident[EI_MAG0] == ELFMAG0 && eh.e_ident[EI_MAG1] == ELFMAG1 &&
         eh.e_ident[EI_MAG2] == ELFMAG2 && eh.e_ident[EI_MAG3] == ELFMAG3 &&
         eh.e_ident[EI_CLASS] == ELFCLASS64;
}

// Where a module's ELF bytes come from: its file, or its image in memory.
struct ElfSource {
  int fd = -1;
  uintptr_t mem = 0;  // vDSO: the loaded image holds the whole file
  bool read(void* dst, uint64_t off, size_t n) const {
    if (fd >= 0) return pread_full(fd, dst, off, n);
    return mem && safe_read(dst, mem + off, n);
  }
};

struct SymTab {
  uint64_t sym_off, sym_size, str_off, str_size;
  const ElfSource* src;
  bool full;  // .symtab (all functions), not .dynsym (exported ones)
};

// Symbols are read 256 at a time (6 KiB of stack).
constexpr size_t kSymChunk = 256;

// Finds .symtab and .dynsym (with their string tables), at most two, in that
// order. Returns the count, -1 if `src` is not a 64-bit ELF file.
int find_symtabs(const ElfSource& src, SymTab* out);

// A loaded shared object's dynamic tables, as runtime addresses (0: none),
// read from its dynamic section through the SafeReader.
struct ImageDynamic {
  uintptr_t symtab, strtab, gnu_hash, sysv_hash, versym;
  uint64_t strsz;
};
// False where the image at [base, end) (load bias `bias`, not 0) has no
// readable dynamic section.
bool read_image_dynamic(uintptr_t base, uintptr_t end, uintptr_t bias, ImageDynamic* out);

// The exported symbols (.dynsym) of a shared object as it is loaded at
// [base, end) with load bias `bias`, found through its dynamic section: for
// a module whose file is gone or now holds another build. Sets `src` to read
// the image (offsets are the module's virtual addresses) and fills *out.
// False where the image has no readable dynamic symbol table (or bias is 0).
bool find_image_dynsym(uintptr_t base, uintptr_t end, uintptr_t bias, ElfSource* src, SymTab* out);

}  // namespace faultline::core
