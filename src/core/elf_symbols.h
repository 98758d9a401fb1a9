// ElfSymbolizer: names native frames from a module's .symtab and .dynsym,
// read with pread(2) from the module's file (or, for the vDSO, which has no
// file, from its loaded image through the SafeReader). The model is abseil's
// symbolize_elf: no dladdr (loader lock), no heap, one pass over each symbol
// table per module however many frames fall in it.
//
// Async-signal-safe: open/pread/close, stack buffers and the arena.
#pragma once

#include "core/arena.h"
#include "core/frames.h"
#include "core/modules.h"

namespace faultline::core {

// Sets symbol/symbol_offset of each frame in `frames` (all in `module`).
// Returns false if the module's symbol tables could not be read (the reason is
// added to `errors` once per module).
bool symbolize_module_frames(const Module& module, NativeFrame** frames, int n, Arena* arena,
                             CaptureErrors* errors);

// Symbolizes every frame of every thread, grouping frames by module.
void symbolize_threads(const ModuleTable& modules, ThreadCapture* threads, int nthreads,
                       Arena* arena, CaptureErrors* errors);

// Finds a symbol's runtime address by name in a module's dynamic and static
// symbol tables (for locating _PyRuntime without dlsym). 0 if absent.
uintptr_t lookup_symbol_address(const Module& module, const char* name);

// Several lookups in one module: the file is opened and its section headers
// read once. With `exported_only`, only .dynsym's GNU hash table is asked (a
// few reads per name), never a scan of the symbol tables.
struct SymbolLookup {
  int fd = -1;
  uintptr_t bias = 0;
  bool exported_only = false;
  bool hash_ready = false;
  uint64_t hash_off = 0, sym_off = 0, str_off = 0, str_size = 0, versym_off = 0;
  uint32_t header[4] = {};  // the hash table's: nbuckets, symoffset, bloom words, shift

  bool open(const Module& module, bool exported_only);  // false: no file to read
  uintptr_t find(const char* name);                     // 0 if absent
  void close();
};

}  // namespace faultline::core
