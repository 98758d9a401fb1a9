#include "core/capture/reraise.h"

#include <stdint.h>

#include "core/base/safe_read.h"
#include "core/base/signals.h"
#include "core/capture/fault_insn.h"
#include "core/crash_state.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/diagnosis.h"
#include "core/modules/elf_symbols.h"
#include "core/unwind/cfi/engine.h"

namespace faultline::core {
namespace {

// x86 exception vectors the kernel leaves in the context's trapno.
constexpr greg_t kTrapDivide = 0;
constexpr greg_t kTrapInvalidOpcode = 6;
constexpr greg_t kTrapGeneralProtection = 13;
constexpr greg_t kTrapPageFault = 14;
constexpr greg_t kPageFaultProtection = 1;  // error code bit: the page was present

bool sent_by_this_process(const Capture& c) {
  int code = c.info.si_code;
  return (code == SI_TKILL || code == SI_USER || code == SI_QUEUE) && c.info.si_pid == c.pid;
}

bool is_fatal_signal(int signo) {
  for (int i = 0; i < kFatalSignalCount; ++i) {
    if (kFatalSignals[i] == signo) return true;
  }
  return false;
}

// The kernel fills the frame's siginfo only for an SA_SIGINFO handler
// (faulthandler's is not one): a siginfo counts if it names a fatal signal
// with a known code and, for a page fault, the address the context's cr2
// holds.
bool siginfo_plausible(const siginfo_t& info, const greg_t* gregs) {
  if (!is_fatal_signal(info.si_signo) || !find_signal_code(info.si_signo, info.si_code)) {
    return false;
  }
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

// Reads the kernel's signal frame at the trampoline frame t.frames[i] and
// checks it against the frame below. Nothing in it is trusted: the stack
// may be corrupt, and a trampoline's frame may hold anything.
bool read_original(const ThreadCapture& t, int i, int delivered, siginfo_t* info, greg_t* gregs,
                   bool* from_context) {
  const NativeFrame& tramp = t.frames[i];
  const NativeFrame& below = t.frames[i + 1];
  uintptr_t uc = tramp.sp;
  if (!safe_read(gregs, uc + offsetof(ucontext_t, uc_mcontext.gregs), sizeof(greg_t) * NGREG) ||
      static_cast<uintptr_t>(gregs[REG_RIP]) != below.pc ||
      static_cast<uintptr_t>(gregs[REG_RSP]) != below.sp) {
    return false;
  }
  *from_context = false;
  if (safe_read(info, uc + kKernelUcontextBytes, sizeof *info) && siginfo_plausible(*info, gregs)) {
    return true;
  }
  *from_context = true;
  return siginfo_from_context(delivered, gregs, info);
}

// The frame below the trampoline ran the faulting instruction: its pc is
// exact. An unwinder that did not flag it (libunwind flags the frame after)
// had it named from pc-1, which may be the function before; name it again.
void make_exact(Capture* c, NativeFrame* f) {
  if (f->signal_frame) return;
  f->signal_frame = true;
  if (f->module < 0 || f->module >= c->modules.count) return;
  const Module& m = c->modules.items[f->module];
  f->symbol = nullptr;
  f->symbol_offset = 0;
  symbolize_module_frames(m, &f, 1, &g_crash.arena, &c->errors);
  f->origin = &classify_native(m.path, f->symbol);
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
bool recover_returned(Capture* c, const ThreadCapture& t) {
  const greg_t* g = c->uc.uc_mcontext.gregs;
  const uintptr_t pc = static_cast<uintptr_t>(g[REG_RIP]);
  if (c->info.si_code != SI_TKILL || t.nframes < 1 || pc != t.frames[0].pc) return false;
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
  siginfo_t info;
  if (!siginfo_from_context(c->signo, g, &info)) return false;
  c->reraised.present = true;
  c->reraised.signo = c->signo;
  c->reraised.info = c->info;
  c->reraised.frame = -1;  // no trampoline: the handler had returned
  c->reraised.from_context = true;
  c->signo = info.si_signo;
  c->info = info;
  return true;
}

}  // namespace

bool recover_reraised_fault(Capture* c) {
  if (c->kind != CaptureKind::kCrash || !c->have_uc || c->reraised.present) return false;
  if (!sent_by_this_process(*c)) return false;
  const ThreadCapture* t = crashed_thread(*c);
  if (!t) return false;
  // The innermost trampoline: the frame of the handler that raised again.
  int i = 1;
  while (i + 1 < t->nframes && !cfi_is_sigreturn(t->frames[i].pc)) ++i;
  if (i + 1 >= t->nframes) return recover_returned(c, *t);
  siginfo_t info;
  greg_t gregs[NGREG];
  bool from_context = false;
  if (!read_original(*t, i, c->signo, &info, gregs, &from_context)) return false;
  c->reraised.present = true;
  c->reraised.signo = c->signo;
  c->reraised.info = c->info;
  c->reraised.frame = i;
  c->reraised.from_context = from_context;
  c->signo = info.si_signo;
  c->info = info;
  __builtin_memcpy(c->uc.uc_mcontext.gregs, gregs, sizeof gregs);
  make_exact(c, const_cast<NativeFrame*>(&t->frames[i + 1]));
  return true;
}

}  // namespace faultline::core
