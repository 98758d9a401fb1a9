// Reading what a Python frame says about itself: unicode objects and line
// tables. Async-signal-safe: every byte of the interpreter is read through
// safe_read(), every loop is bounded by a length that was itself checked.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/base/arena.h"
#include "core/python/layouts.h"

namespace faultline::core::python {

// Longest string kept, in code points; longer ones end with "..." (the
// marker faulthandler uses). 1024: a path or a qualified name fits, a
// pathological 100 KB name costs at most 4 KB of arena.
constexpr long kMaxStringChars = 1024;

// Why a read failed, for the report. Static strings.
struct TextError {
  const char* what;
};

// Decodes the str object at addr to UTF-8 in the arena. pre: got bytes
// already read at addr (its header and, for a short compact string, its
// characters: one read instead of two), or nullptr (got 0); what is not
// there is read. unicode_type: the address of PyUnicode_Type (0 to skip the
// type check). nullptr on failure, with err->what set.
const char* read_unicode(const PyLayout& l, uintptr_t addr, const uint8_t* pre, size_t got,
                         uintptr_t unicode_type, Arena* arena, TextError* err);

// The line an instruction offset (in bytes; negative: not started) maps to,
// from the code object's line table (bytes data at table, len bytes).
// -1 when the table has no line for it or could not be read.
int line_for_offset(LineTableKind kind, uintptr_t table, long len, int firstlineno, long offset);

}  // namespace faultline::core::python
