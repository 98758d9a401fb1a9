// Per-thread recovery from a fault inside faultline's own handlers: a capture
// step runs with its thread's recovery point armed (ThreadState::recover,
// thread_state.h); if it faults (a corrupt pointer that got past the
// SafeReader, a corrupt stack under libunwind), the fatal-signal handler
// jumps back there instead of recursing or killing a live process.
#pragma once

#include <setjmp.h>

#include "core/base/thread_state.h"
