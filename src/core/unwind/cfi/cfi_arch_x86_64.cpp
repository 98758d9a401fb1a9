// The CFI unwinder's x86-64 part (cfi_arch.h).
#include <stddef.h>

#include "core/base/safe_read.h"
#include "core/unwind/cfi/cfi_arch.h"

namespace faultline::core::cfi {
namespace {

// DWARF register number -> index in ucontext's gregs.
constexpr int kGregOf[kCfiNumRegs] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                      REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                      REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};

}  // namespace

void arch_regs_from_ucontext(const ucontext_t& uc, CfiRegs* regs) {
  for (int i = 0; i < kCfiNumRegs; ++i)
    regs->r[i] = static_cast<uintptr_t>(uc.uc_mcontext.gregs[kGregOf[i]]);
  regs->valid = cfi_bit(kCfiNumRegs) - 1;
}

void arch_regs_to_ucontext(const CfiRegs& regs, ucontext_t* uc) {
  for (int i = 0; i < kCfiNumRegs; ++i) {
    uc->uc_mcontext.gregs[kGregOf[i]] =
        static_cast<greg_t>(regs.valid & cfi_bit(i) ? regs.r[i] : 0);
  }
}

// The rt_sigreturn trampoline: mov $15,%rax; syscall. The interrupted
// context's ucontext is at sp.
bool arch_is_sigreturn(uintptr_t pc) {
  static const uint8_t kCode[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  uint8_t code[9];
  if (!safe_read(code, pc, sizeof code)) return false;
  for (size_t i = 0; i < sizeof code; ++i) {
    if (code[i] != kCode[i]) return false;
  }
  return true;
}

CfiStatus arch_step_sigreturn(CfiRegs* regs, bool* exact) {
  uintptr_t gregs = regs->r[kCfiRsp] + offsetof(ucontext_t, uc_mcontext.gregs);
  greg_t g[NGREG];
  if (!safe_read(g, gregs, sizeof g)) return CfiStatus::kUnreadable;
  for (int i = 0; i < kCfiNumRegs; ++i) regs->r[i] = static_cast<uintptr_t>(g[kGregOf[i]]);
  regs->valid = cfi_bit(kCfiNumRegs) - 1;
  *exact = true;
  return CfiStatus::kStepped;
}

bool arch_follows_call(uintptr_t ret) {
  // call rel32 (e8), or call through a register or memory (ff /2): 2, 3,
  // 4, 6 or 7 bytes from ff on (ModRM, SIB, displacement; a REX prefix comes
  // before it): b[k] is the byte at ret-7+k.
  uint8_t b[7];
  if (ret < sizeof b || !safe_read(b, ret - sizeof b, sizeof b)) return false;
  if (b[2] == 0xe8) return true;
  static const int kFf[] = {5, 4, 3, 1, 0};  // ff at ret-2, -3, -4, -6, -7
  for (int at : kFf) {
    if (b[at] == 0xff && (b[at + 1] & 0x38) == 0x10) return true;
  }
  return false;
}

bool arch_step_without_tables(const CfiModules& mods, CfiRegs* regs, StackWindow* stack) {
  uintptr_t ret = 0;
  if (!(regs->valid & cfi_bit(kCfiRsp)) || !stack->read(regs->r[kCfiRsp], &ret)) return false;
  if (cfi_find_module(mods, ret - 1) < 0 || !arch_follows_call(ret)) return false;
  regs->r[kCfiRip] = ret;
  regs->r[kCfiRsp] += 8;
  return true;
}

}  // namespace faultline::core::cfi
