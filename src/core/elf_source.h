// A module's ELF file as the symbol readers see it: bytes by pread(2) from
// the file, or through the SafeReader from the loaded image (the vDSO), and
// its symbol tables. Async-signal-safe.
#pragma once

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "core/safe_read.h"

namespace faultline::core {

// Where a module's ELF bytes come from: its file, or its image in memory.
struct ElfSource {
  int fd = -1;
  uintptr_t mem = 0;  // vDSO: the loaded image holds the whole file
  bool read(void* dst, uint64_t off, size_t n) const {
    if (fd >= 0) {
      char* out = static_cast<char*>(dst);
      while (n > 0) {
        ssize_t r = pread(fd, out, n, static_cast<off_t>(off));
        if (r <= 0) return false;
        out += r;
        off += static_cast<uint64_t>(r);
        n -= static_cast<size_t>(r);
      }
      return true;
    }
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

}  // namespace faultline::core
