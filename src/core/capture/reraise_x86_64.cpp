// x86-64's part of reraise.cpp (reraise_arch.h): the kernel's signal frame
// (its ucontext, then its siginfo), and the fault a context's trap number,
// error code and cr2 describe, checked against the instruction at its pc.
#include <stddef.h>
#include <stdint.h>

#include "core/base/safe_read.h"
#include "core/capture/fault_insn.h"
#include "core/capture/reraise_arch.h"

namespace faultline::core {
namespace {

// x86 exception vectors the kernel leaves in the context's trapno.
constexpr greg_t kTrapDivide = 0;
constexpr greg_t kTrapInvalidOpcode = 6;
constexpr greg_t kTrapGeneralProtection = 13;
constexpr greg_t kTrapPageFault = 14;
constexpr greg_t kPageFaultProtection = 1;  // error code bit: the page was present

// The kernel fills the frame's siginfo only for an SA_SIGINFO handler
// (faulthandler's is not one): a siginfo counts if it names a fatal signal
// with a known code and, for a page fault, the address the context's cr2
// holds.
bool siginfo_plausible(const siginfo_t& info, const greg_t* gregs) {
  if (!names_fatal_fault(info)) return false;
  bool page_fault = (info.si_signo == SIGSEGV || info.si_signo == SIGBUS) && info.si_code > 0 &&
                    info.si_code != SI_KERNEL && gregs[REG_TRAPNO] == kTrapPageFault;
  return !page_fault ||
         reinterpret_cast<uintptr_t>(info.si_addr) == static_cast<uintptr_t>(gregs[REG_CR2]);
}

// The instruction at pc: its opcode after any prefixes, and the byte after
// it (the ModRM byte, or a two-byte opcode's second byte).
bool read_instruction(uintptr_t pc, uint8_t* opcode, uint8_t* next) {
  uint8_t b[8];
  if (!safe_read(b, pc, sizeof b)) return false;
  size_t i = 0;
  while (i < 4 && (b[i] == 0x66 || b[i] == 0x67 || b[i] == 0x2e || b[i] == 0x3e || b[i] == 0x26 ||
                   b[i] == 0x64 || b[i] == 0x65 || b[i] == 0x36 || b[i] == 0xf0 || b[i] == 0xf2 ||
                   b[i] == 0xf3)) {
    ++i;
  }
  if ((b[i] & 0xf0) == 0x40) ++i;  // REX
  *opcode = b[i];
  *next = b[i + 1];
  return true;
}

// A thread a signal interrupted in a system call sits right after the
// syscall instruction; a fault there is rare, and the context's trap
// number may be left from an earlier fault of the thread's.
bool after_syscall(uintptr_t pc) {
  uint8_t b[2];
  return safe_read(b, pc - 2, sizeof b) && b[0] == 0x0f && b[1] == 0x05;
}

// Else the fault as the kernel would have described it, from the trap the
// context records, for the signal the handler raised again (which names it:
// a divide error is SIGFPE only if SIGFPE was raised).
bool siginfo_from_context(int signo, const greg_t* gregs, siginfo_t* info) {
  __builtin_memset(info, 0, sizeof *info);
  info->si_signo = signo;
  greg_t trap = gregs[REG_TRAPNO];
  uintptr_t addr = static_cast<uintptr_t>(gregs[REG_RIP]);
  uint8_t op = 0, next = 0;
  if (after_syscall(addr) || !read_instruction(addr, &op, &next)) return false;
  // div and idiv (F6/F7 /6, /7); ud2 (0F 0B).
  bool divides = (op == 0xf6 || op == 0xf7) && ((next >> 3) & 7) >= 6;
  bool ud2 = op == 0x0f && next == 0x0b;
  if (signo == SIGSEGV && trap == kTrapPageFault) {
    info->si_code = (gregs[REG_ERR] & kPageFaultProtection) ? SEGV_ACCERR : SEGV_MAPERR;
    addr = static_cast<uintptr_t>(gregs[REG_CR2]);
  } else if (signo == SIGSEGV && trap == kTrapGeneralProtection) {
    info->si_code = SI_KERNEL;
    addr = 0;
  } else if (signo == SIGBUS && trap == kTrapPageFault) {
    info->si_code = BUS_ADRERR;
    addr = static_cast<uintptr_t>(gregs[REG_CR2]);
  } else if (signo == SIGFPE && trap == kTrapDivide && divides) {
    info->si_code = FPE_INTDIV;
  } else if (signo == SIGILL && trap == kTrapInvalidOpcode && ud2) {
    info->si_code = ILL_ILLOPN;
  } else {
    return false;
  }
  info->si_addr = reinterpret_cast<void*>(addr);
  return true;
}

}  // namespace

// x86-64's frame at the trampoline's sp is the kernel's struct ucontext
// (uc_flags, uc_link, uc_stack, uc_mcontext laid out as glibc's
// ucontext_t, then an 8-byte uc_sigmask), followed by its struct siginfo.
bool read_original_frame(uintptr_t sp, uintptr_t below_pc, uintptr_t below_sp, int delivered,
                         siginfo_t* info, ucontext_t* uc, bool* from_context) {
  constexpr size_t kKernelUcontextBytes = offsetof(ucontext_t, uc_sigmask) + 8;
  greg_t gregs[NGREG];
  siginfo_t found;
  if (!safe_read(gregs, sp + offsetof(ucontext_t, uc_mcontext.gregs), sizeof gregs) ||
      static_cast<uintptr_t>(gregs[REG_RIP]) != below_pc ||
      static_cast<uintptr_t>(gregs[REG_RSP]) != below_sp) {
    return false;
  }
  bool rebuilt = false;
  if (!safe_read(&found, sp + kKernelUcontextBytes, sizeof found) ||
      !siginfo_plausible(found, gregs)) {
    rebuilt = true;
    if (!siginfo_from_context(delivered, gregs, &found)) return false;
  }
  *info = found;
  *from_context = rebuilt;
  __builtin_memcpy(uc->uc_mcontext.gregs, gregs, sizeof gregs);
  return true;
}

// A handler that restored the previous one (faultline's), raised the signal
// again at its own thread and returned instead of dying in its own frame
// (UCX's error handler does, loaded by torch builds that use it): the
// re-raise was pending while it ran and came as soon as it returned, at the
// faulting instruction, with no trampoline left on the stack. The context
// is the fault's own, and its trap number, error code and cr2 are still the
// fault's. But the kernel keeps a thread's last fault in those fields for
// good (across fork and exec too), so they count only where the
// instruction at pc would have made that fault: a user-mode page fault
// near cr2, a div by 0 or -1, a ud2 (fault_insn.h). Only a signal sent to
// the thread itself (tgkill: a kill() goes to the process); a general
// protection fault, which names no address, is never rebuilt this way.
bool rebuild_returned_fault(const Capture& c, const ThreadCapture& t, siginfo_t* info) {
  const greg_t* g = c.uc.uc_mcontext.gregs;
  const uintptr_t pc = static_cast<uintptr_t>(g[REG_RIP]);
  if (c.info.si_code != SI_TKILL || t.nframes < 1 || pc != t.frames[0].pc) return false;
  uint8_t code[16];
  size_t n = sizeof code;
  if (!safe_read(code, pc, n)) {
    n = 4096 - (pc & 4095);  // the instruction may end at its page's end
    if (n >= sizeof code || !safe_read(code, pc, n)) return false;
  }
  const greg_t trap = g[REG_TRAPNO];
  constexpr greg_t kPageFaultUser = 4;  // error code bit: the access came from user mode
  if (trap == kTrapPageFault) {
    if (!(g[REG_ERR] & kPageFaultUser) ||
        !insn_could_fault_at(code, n, g, static_cast<uint64_t>(g[REG_CR2]))) {
      return false;
    }
  } else if (trap == kTrapDivide) {
    if (!insn_divides_by_zero(code, n, g)) return false;
  } else if (trap != kTrapInvalidOpcode) {
    return false;
  }
  return siginfo_from_context(c.signo, g, info);
}

}  // namespace faultline::core
