// Calling the program's own handler for a hardware fault as a function, and
// telling from what it did whether it recovered (chain_call.cpp).
#pragma once

#include <signal.h>

namespace faultline::core {

struct ThreadState;

// A hardware fault (SIGSEGV, SIGBUS, SIGILL, SIGFPE from the kernel) whose
// handler behind faultline's is a function of the program's: a runtime, a
// JIT or a probe may recover from it. faultline calls that handler as a
// function, as the kernel would, while it stays installed and holds no
// ownership, and tells from what the handler did whether it recovered:
//   - it siglongjmps away, or returns with the context's pc or sp changed:
//     recovered, nothing is reported;
//   - it returns with the signal pending (a re-raise, kept pending while it
//     runs) or with the signal's disposition changed: not recovered, report
//     now, then let the program's choice take effect;
//   - it returns with nothing changed: the instruction is retried, and the
//     same fault again on this thread (every register equal) was not
//     recovered.
// In which order (FAULTLINE_CHAIN_ORDER): a handler that was there before
// faultline runs first (it is where recovery happens, and a report first
// would cost one per recovered fault); one installed later and kept behind
// faultline by the sigaction interposer gets the report first (it may _exit).
// Returns false when this does not apply (the ordinary report and chain()).
bool chain_call(int signo, siginfo_t* info, void* ucv);

// For the sigaction() interposer: whether this thread is inside the
// program's handler for signo that chain_call() runs. Its sigaction() calls
// for signo are then recorded as what faultline hands on to, not applied,
// so faultline stays installed even if the handler siglongjmps away.
bool chain_call_active(int signo);
// For the interposer, inside such a call: keeps a reset to the default (or to
// ignore) until faultline has decided what the handler's return means.
bool chain_call_defer(int signo, const struct sigaction& act);

// Set at install: whether the program's sigaction() calls reach faultline's
// interposer (preloaded or linked), not the kernel (loaded late).
extern volatile int g_sigaction_interposed;

// On entry of the crash handler: whether this signal was raised by the
// program's handler that chain_call() is running on this thread (an abort,
// a raise of another signal). kReportIt: the report is of the fault that
// handler was called for (the arguments are replaced with it); kReported:
// that fault was reported already, this signal is only handed on.
// kHeld: the program's SA_NODEFER handler raised its own signal again; it is
// held for faultline to act on once that handler returns (the caller just
// returns).
enum class Nested { kNo, kReportIt, kReported, kHeld };
Nested chain_call_nested(ThreadState* st, void* ucv, int* signo, siginfo_t** info, void** uc);

}  // namespace faultline::core
