// Symbols by name in a module's file: .dynsym's GNU hash table, or a scan of
// the symbol tables (for locating _PyRuntime and the like without dlsym).
// Install time and crash time alike; async-signal-safe.
#pragma once

#include <stdint.h>

#include "core/modules/modules.h"

namespace faultline::core {

// Finds a symbol's runtime address by name in a module's dynamic and static
// symbol tables (for locating _PyRuntime without dlsym). 0 if absent.
uintptr_t lookup_symbol_address(const Module& module, const char* name);

// Several lookups in one module: the file is opened and its section headers
// read once; .dynsym's GNU hash table is asked first, the symbol tables are
// scanned for what it does not export.
struct SymbolLookup {
  int fd = -1;
  uintptr_t mem = 0;  // no file: the loaded image's GNU hash table (bias)
  uintptr_t bias = 0;
  bool hash_ready = false;
  uint64_t hash_off = 0, sym_off = 0, str_off = 0, str_size = 0, versym_off = 0;
  uint32_t header[4] = {};  // the hash table's: nbuckets, symoffset, bloom words, shift

  bool open(const Module& module);  // false: no file (nor image table) to read
  // The loaded image's own table only (exported symbols of the build that
  // runs, read through the SafeReader), whatever its file now holds.
  bool open_image(const Module& module);
  uintptr_t find(const char* name);  // 0 if absent
  void close();
};

}  // namespace faultline::core
