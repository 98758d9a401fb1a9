// The CFI unwinder's aarch64 part (cfi_arch.h).
#include <signal.h>
#include <stddef.h>

#include "core/base/safe_read.h"
#include "core/unwind/cfi/cfi_arch.h"

namespace faultline::core::cfi {
namespace {

// x0-x30, sp, pc, in the order mcontext_t keeps them.
struct GeneralRegs {
  uint64_t x[31];
  uint64_t sp;
  uint64_t pc;
};
static_assert(offsetof(mcontext_t, sp) == offsetof(mcontext_t, regs) + 31 * 8, "mcontext layout");
static_assert(offsetof(mcontext_t, pc) == offsetof(mcontext_t, sp) + 8, "mcontext layout");

void from_general(const GeneralRegs& g, CfiRegs* regs) {
  for (int i = 0; i < 31; ++i) regs->r[i] = g.x[i];
  regs->r[kCfiRsp] = g.sp;
  regs->r[kCfiRip] = g.pc;
  regs->valid = cfi_bit(kCfiNumRegs) - 1;
}

}  // namespace

void arch_regs_from_ucontext(const ucontext_t& uc, CfiRegs* regs) {
  GeneralRegs g;
  __builtin_memcpy(&g, uc.uc_mcontext.regs, sizeof g);
  from_general(g, regs);
}

void arch_regs_to_ucontext(const CfiRegs& regs, ucontext_t* uc) {
  GeneralRegs g;
  for (int i = 0; i < 31; ++i) g.x[i] = regs.valid & cfi_bit(i) ? regs.r[i] : 0;
  g.sp = regs.valid & cfi_bit(kCfiRsp) ? regs.r[kCfiRsp] : 0;
  g.pc = regs.valid & cfi_bit(kCfiRip) ? regs.r[kCfiRip] : 0;
  __builtin_memcpy(uc->uc_mcontext.regs, &g, sizeof g);
}

// The rt_sigreturn trampoline: mov x8, #139 (__NR_rt_sigreturn); svc #0.
// The kernel's (the vDSO's __kernel_rt_sigreturn) and qemu-user's (an
// anonymous page) alike.
bool arch_is_sigreturn(uintptr_t pc) {
  uint32_t code[2];
  if ((pc & 3) != 0 || !safe_read(code, pc, sizeof code)) return false;
  return code[0] == 0xd2801168 && code[1] == 0xd4000001;
}

// sp at the trampoline is the kernel's struct rt_sigframe: the siginfo,
// then the ucontext (glibc's ucontext_t has the kernel's layout).
CfiStatus arch_step_sigreturn(CfiRegs* regs, bool* exact) {
  uintptr_t at = regs->r[kCfiRsp] + sizeof(siginfo_t) + offsetof(ucontext_t, uc_mcontext.regs);
  GeneralRegs g;
  if (!safe_read(&g, at, sizeof g)) return CfiStatus::kUnreadable;
  from_general(g, regs);
  *exact = true;
  return CfiStatus::kStepped;
}

bool arch_follows_call(uintptr_t ret) {
  uint32_t insn;
  if (ret < 4 || (ret & 3) != 0 || !safe_read(&insn, ret - 4, sizeof insn)) return false;
  return (insn & 0xfc000000) == 0x94000000 ||  // bl
         (insn & 0xfffffc1f) == 0xd63f0000 ||  // blr
         (insn & 0xfffff800) == 0xd73f0800 ||  // blraa, blrab
         (insn & 0xfffff81f) == 0xd63f081f;    // blraaz, blrabz
}

// The return address of a function stopped before it saved x30 (or a call
// through a bad pointer) is still in x30; sp is the caller's.
bool arch_step_without_tables(const CfiModules& mods, CfiRegs* regs, StackWindow*) {
  if (!(regs->valid & cfi_bit(kCfiRa))) return false;
  uintptr_t ret = strip_return_address(regs->r[kCfiRa]);
  if (cfi_find_module(mods, ret - 1) < 0 || !arch_follows_call(ret)) return false;
  regs->r[kCfiRip] = ret;
  return true;
}

}  // namespace faultline::core::cfi
