// Call-frame information of a module: the FDE for a pc from .eh_frame_hdr's
// search table, its CIE, and the row (CFA and register rules) its program
// gives at the pc; and a lock-free cache of rows per capture generation.
// Part of the CFI unwinder (unwind/cfi/engine.h). Async-signal-safe.
#pragma once

#include <stdint.h>

#include "core/unwind/cfi/engine.h"

namespace faultline::core::cfi {

enum RuleKind : uint8_t {
  kUnset = 0,  // not mentioned: same value
  kUndefined,
  kSame,
  kOffset,     // saved at CFA + value
  kValOffset,  // is CFA + value
  kRegister,   // in register value
  kExpr,       // saved at the address the expression yields (CFA pushed first)
  kValExpr,    // is the value the expression yields
};

struct Rule {
  RuleKind kind;
  uint32_t len;   // expression length
  int64_t value;  // offset, register, or expression address
};

struct Row {
  Rule cfa;  // kRegister (value: reg, len unused, off in cfa_off) or kValExpr
  int64_t cfa_off;
  Rule regs[kCfiNumRegs];
  bool has_expr;
  bool signal;  // the CIE has the 'S' augmentation
};

struct Cie {
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra;
  uint8_t fde_enc;
  bool has_z;
  bool signal;
  uintptr_t insns, end;
};

// Computes the row for pc (the lookup address) in the module's tables.
// Parsed CIEs and their initial rows, per walk: a module's FDEs share a
// handful of CIEs.
struct CieCache {
  static constexpr int kSize = 2;
  uintptr_t addr[kSize];
  Cie cie[kSize];
  Row initial[kSize];
  int next;
};

// The row for pc (the lookup address) in the module's tables.
CfiStatus find_row(const CfiModule& m, uintptr_t pc, Row* row, CieCache* cache);

// Rows already computed, keyed by lookup address, valid for the current
// generation only. get: false when absent or being written; put: skipped
// when another thread writes the slot (never waits).
bool row_cache_get(uintptr_t key, Row* out);
void row_cache_put(uintptr_t key, const Row& row);
void row_cache_new_generation();

}  // namespace faultline::core::cfi
