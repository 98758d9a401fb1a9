// The entry points: the fatal-signal handler and the live-dump handler, and
// the ownership protocol between them (the owner word, handler_state.h).
// doc/design.md walks through one crash from signal to report.
#pragma once

#include <signal.h>

namespace faultline::core {

void crash_signal_handler(int signo, siginfo_t* info, void* ucontext);
void dump_signal_handler(int signo, siginfo_t* info, void* ucontext);

// In a fork child: nobody owns a crash there.
void reset_ownership_after_fork();

}  // namespace faultline::core
