// Running a capture: the crash owner starts one in the arena and runs every
// capture phase (phase.h) into it, then the diagnosis. Async-signal-safe.
#pragma once

#include <signal.h>

#include "core/capture.h"

namespace faultline::core {

// Starts a capture afresh in the crash arena (and frees the descriptor kept
// in reserve, so the report can be opened). nullptr without an arena.
Capture* begin_capture();
// Keeps kReservedFds descriptors in reserve for the next capture (install,
// and after a live dump), once all were released. Async-signal-safe.
void reserve_fds();

// Runs every capture phase for the signal signo (info, ucontext ucv) on the
// calling thread, then the diagnosis.
void capture_all(Capture* c, CaptureKind kind, int signo, siginfo_t* info, void* ucv);

}  // namespace faultline::core
