// The entry points: the fatal-signal handler and the live-dump handler, and
// the ownership protocol between them (the owner word, handler_state.h).
// doc/design.md walks through one crash from signal to report.
#pragma once

#include <signal.h>

#include "core/capture.h"

namespace faultline::core {

void crash_signal_handler(int signo, siginfo_t* info, void* ucontext);
void dump_signal_handler(int signo, siginfo_t* info, void* ucontext);
// The live dump in the process by the signal request, never the helper: a
// dump made by a call on this thread (faultline_dump_now's fallback, an
// exception report).
void dump_in_process(int signo, siginfo_t* info, void* ucontext);

// Claims the crash and writes the report of signo/info/ucv. Returns false
// when another thread owns the crash: this one was recorded for that report
// and waited for it (the caller then hands its own signal on).
bool report_crash(int signo, siginfo_t* info, void* ucv);
// After a report, when the program's handler may recover: a later crash
// deserves its own report.
void release_ownership();

// In a fork child: nobody owns a crash there.
void reset_ownership_after_fork();

// Crashes of other threads that arrived while the first one was reported
// (the capture points at them: Capture::secondary).
extern SecondaryCrash g_secondary[kMaxSecondary];
extern volatile int g_nsecondary;

}  // namespace faultline::core
