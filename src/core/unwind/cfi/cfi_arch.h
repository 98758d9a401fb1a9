// The architecture's part of the CFI unwinder: the registers of a signal
// context, the signal trampoline and its frame, what a return address
// follows, and the first step from a pc without unwind tables. One file per
// architecture (cfi_arch_x86_64.cpp, cfi_arch_aarch64.cpp), the build
// compiles the target's. Async-signal-safe.
#pragma once

#include <stdint.h>
#include <ucontext.h>

#include "core/unwind/cfi/engine.h"
#include "core/unwind/cfi/stream.h"

namespace faultline::core::cfi {

// Registers of a context, and back (not known: 0).
void arch_regs_from_ucontext(const ucontext_t& uc, CfiRegs* regs);
void arch_regs_to_ucontext(const CfiRegs& regs, ucontext_t* uc);

// Whether pc is the rt_sigreturn trampoline, by its instructions (qemu-user
// has no vDSO: its trampoline has no symbol and no tables).
bool arch_is_sigreturn(uintptr_t pc);

// From the trampoline (sp: the kernel's signal frame) to the interrupted
// context.
CfiStatus arch_step_sigreturn(CfiRegs* regs, bool* exact);

// Whether the instruction before ret is a call.
bool arch_follows_call(uintptr_t ret);

// The caller of a first frame whose pc has no unwind information: the
// return address on top of the stack (x86-64) or in the link register
// (aarch64), if it looks like one. False when it does not.
bool arch_step_without_tables(const CfiModules& mods, CfiRegs* regs, StackWindow* stack);

}  // namespace faultline::core::cfi
