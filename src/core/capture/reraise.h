// A fatal signal raised again by a handler that ran first (CPython's
// faulthandler, a program's own handler that restores the previous one and
// re-raises): the signal faultline is handed is the re-raise, sent by the
// process itself, and the original fault is still on the stack, in the
// kernel's signal frame under the trampoline the handler returns to.
// Async-signal-safe.
#pragma once

#include "core/capture.h"

namespace faultline::core {

// When the crash's signal was sent by this process (tkill, kill, sigqueue)
// and the crashed thread's stack passes through a signal trampoline whose
// frame holds a fatal signal's siginfo, with a plausible code, and a context
// whose pc and sp are the frame below's: records the signal as delivered
// in c->reraised and makes c->signo, c->info and c->uc's registers the
// original fault's. x86-64 only (reraise_arch.h): a frame without a
// siginfo (a handler without SA_SIGINFO), or no trampoline on the stack
// (the handler returned, and its re-raise came at the faulting
// instruction), has the fault rebuilt from the context's trap number,
// error code and cr2 where they describe one. Otherwise leaves the capture
// as it is. True if it did.
bool recover_reraised_fault(Capture* c);

}  // namespace faultline::core
