// The DWARF expressions call-frame information uses (the stack machine of
// the PLT and hand-written assembly), evaluated over the unwinder's
// registers. Part of the CFI unwinder (unwind/cfi/engine.h). Async-signal-safe.
#pragma once

#include <stdint.h>

#include "core/unwind/cfi/engine.h"

namespace faultline::core::cfi {

// Evaluates the expression at addr (len bytes) with regs; push_cfa: the CFA
// is pushed first (a register rule's expression). False when it reads an
// unknown register, overflows its stack or uses an operation not supported.
bool eval_expr(uintptr_t addr, uint32_t len, const CfiRegs& regs, bool push_cfa, uintptr_t cfa,
               uintptr_t* out);

}  // namespace faultline::core::cfi
