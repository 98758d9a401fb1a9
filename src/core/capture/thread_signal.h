// The thread-dump signal (FAULTLINE_THREAD_SIGNAL) as a disposition: faultline's
// handler installed for it, put back when the program took the signal over,
// and the program's own uses of the signal handed on to the handler that
// was there before (the asking and answering is threads.h).
// Async-signal-safe except where it says install time.
#pragma once

#include <signal.h>

#include "core/frames.h"

namespace faultline::core {

// Install time: installs the handler for the thread-dump signal (chaining to
// any previous handler of that signal for signals that are not ours).
void threads_init(int signo);
void threads_uninstall();

// The signal installed (0: none).
int thread_signal_number();

// Before a capture asks: puts faultline's handler back if the program
// replaced it since, noting so in errors.
void reclaim_thread_signal(CaptureErrors* errors);

// A delivery of the signal that is not a capture's: on to the program's
// handler, once per thread at a time (a handler that hands it back to ours
// would loop).
void chain_previous(int signo, siginfo_t* info, void* uc);

// In a fork child: no thread is inside chain_previous there.
void thread_signal_reset_after_fork();

}  // namespace faultline::core
