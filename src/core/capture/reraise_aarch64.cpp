// aarch64's part of reraise.cpp (reraise_arch.h): the kernel's signal
// frame at the trampoline's sp is its struct rt_sigframe, the siginfo and
// then the ucontext (glibc's ucontext_t has its layout). The frame's
// siginfo counts where it names a fatal signal with a known code and, for
// a memory fault, the address the frame's fault_address holds.
//
// A fault is not rebuilt from a context alone, as on x86-64 (a handler
// without SA_SIGINFO, whose frame holds no siginfo; a handler that
// returned before its re-raise came): that takes the ESR record, to tell a
// fault from a fault_address left by an earlier one, and qemu-user, where
// the aarch64 suite runs, writes none, so it could not be tested
// (doc/aarch64.md). There the report names the re-raised signal.
#include <stddef.h>
#include <stdint.h>

#include "core/base/safe_read.h"
#include "core/capture/reraise_arch.h"

namespace faultline::core {
namespace {

// The mcontext from its fault_address to pstate, as the kernel lays it out.
struct FrameRegs {
  uint64_t fault_address;
  uint64_t x[31];
  uint64_t sp, pc, pstate;
};
static_assert(offsetof(mcontext_t, regs) == offsetof(mcontext_t, fault_address) + 8 &&
                  offsetof(mcontext_t, pstate) == offsetof(mcontext_t, fault_address) + 272,
              "the mcontext's general registers follow its fault_address");

}  // namespace

bool read_original_frame(uintptr_t sp, uintptr_t below_pc, uintptr_t below_sp, int /*delivered*/,
                         siginfo_t* info, ucontext_t* uc, bool* from_context) {
  FrameRegs g;
  siginfo_t found;
  const uintptr_t context = sp + sizeof(siginfo_t);
  if (!safe_read(&g, context + offsetof(ucontext_t, uc_mcontext.fault_address), sizeof g) ||
      g.pc != below_pc || g.sp != below_sp || !safe_read(&found, sp, sizeof found) ||
      !names_fatal_fault(found)) {
    return false;
  }
  bool memory_fault = (found.si_signo == SIGSEGV || found.si_signo == SIGBUS) &&
                      found.si_code > 0 && found.si_code != SI_KERNEL;
  if (memory_fault && reinterpret_cast<uintptr_t>(found.si_addr) != g.fault_address) return false;
  *info = found;
  *from_context = false;
  mcontext_t& m = uc->uc_mcontext;
  m.fault_address = g.fault_address;
  __builtin_memcpy(m.regs, g.x, sizeof g.x);
  m.sp = g.sp;
  m.pc = g.pc;
  m.pstate = g.pstate;
  return true;
}

bool rebuild_returned_fault(const Capture&, const ThreadCapture&, siginfo_t*) {
  return false;
}

}  // namespace faultline::core
