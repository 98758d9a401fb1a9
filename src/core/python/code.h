// Python code objects as the frame walker reads them: file, name, qualified
// name, first line and line table, decoded once per capture; and where in its
// code a frame is. Async-signal-safe: every byte read through safe_read().
#pragma once

#include <stdint.h>

#include "core/base/arena.h"
#include "core/base/safe_read.h"
#include "core/python/layouts.h"
#include "core/python/runtime.h"

namespace faultline::core::python {

// Code objects remembered per capture (file/name/qualname decoded once).
constexpr int kCodeCacheSlots = 1024;

struct CodeInfo {
  uintptr_t code;
  const char* file;
  const char* name;
  const char* qualname;
  int firstlineno;
  uintptr_t table;  // line table bytes
  long table_len;
  uintptr_t first_instr;  // co_code_adaptive (3.11+)
  const char* error;      // why the code object could not be used
};

// A little-endian word at buf + off, and one read from the interpreter.
inline uint64_t u64_in(const uint8_t* buf, int off) {
  uint64_t v;
  __builtin_memcpy(&v, buf + off, sizeof v);
  return v;
}

inline bool read_u64(uintptr_t addr, uint64_t* v) {
  return safe_read_obj(v, addr);
}

// The code objects of a capture, each read once: entries handed out in
// order (their pages touched one after another; hashed into a table of
// 1024 entries, 72 KiB, each new code object was a page fault) and an index
// of entry numbers (+ 1, 0: free) by the object's address.
struct CodeCache {
  uint16_t index[kCodeCacheSlots];
  CodeInfo* entries;  // kCodeCacheSlots, not zeroed: each is written whole when handed out
  int used;
  uintptr_t file_obj;  // the last co_filename decoded, and what it decoded to
  const char* file;
};
static_assert(kCodeCacheSlots < 65536, "entry numbers fit the index");

// Where the cache comes from: nullptr when the arena is short.
CodeCache* code_cache_new(Arena* arena);

// The code object at `code`, read once per capture (cache nullptr: none; a
// full cache reuses one scratch entry). On failure the entry's `error`
// says why.
const CodeInfo* code_info(const Runtime& rt, const PyLayout& l, Arena* arena, CodeCache* cache,
                          uintptr_t code);

// The instruction offset in bytes a frame is at (negative: not started).
long instr_offset(const PyLayout& l, const uint8_t* frame, const CodeInfo& c);

}  // namespace faultline::core::python
