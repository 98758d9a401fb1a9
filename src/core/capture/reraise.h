// A fatal signal raised again by a handler that ran first (CPython's
// faulthandler, a program's own handler that restores the previous one and
// re-raises): the signal faultline is handed is the re-raise, sent by the
// process itself, and the original fault is still on the stack, in the
// kernel's signal frame under the trampoline the handler returns to.
// Async-signal-safe.
#pragma once

#include <stddef.h>
#include <ucontext.h>

#include "core/capture.h"

namespace faultline::core {

// x86-64: the kernel's signal frame at the trampoline's sp is its struct
// ucontext (uc_flags, uc_link, uc_stack, uc_mcontext laid out as glibc's
// ucontext_t, then an 8-byte uc_sigmask), followed by its struct siginfo.
constexpr size_t kKernelUcontextBytes = offsetof(ucontext_t, uc_sigmask) + 8;

// When the crash's signal was sent by this process (tkill, kill, sigqueue)
// and the crashed thread's stack passes through a signal trampoline whose
// frame holds a fatal signal's siginfo, with a plausible code, and a context
// whose rip and rsp are the frame below's: records the signal as delivered
// in c->reraised and makes c->signo, c->info and c->uc's registers the
// original fault's. With no trampoline on the stack (the handler returned,
// and its re-raise came at the faulting instruction), the fault is rebuilt
// from the delivered context's trap number, error code and cr2 where they
// describe one. Otherwise leaves the capture as it is. True if it did.
bool recover_reraised_fault(Capture* c);

}  // namespace faultline::core
