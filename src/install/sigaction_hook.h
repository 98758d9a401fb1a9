// The sigaction() interposer (FAULTLINE_STAY_IN_FRONT, on by default): keeps faultline's
// handlers in front of the program's, and finds libc's sigaction for
// faultline's own calls (core/base/sigaction_real.h). The interposer itself
// (sigaction_hook.cpp) may run inside a program's signal handler; what it
// needs from the loader is found at install (sigaction_install.cpp).
#pragma once

#include <stdint.h>

#include "core/base/sigaction_real.h"

namespace faultline::core {

extern volatile int g_stay_in_front;
// Also for the shutdown signals (SIGTERM, SIGINT) where shutdown reports
// are on (core/signal/shutdown.h): the same as g_stay_in_front.
extern volatile int g_stay_in_front_of_shutdown;
// The extent of the module that defines Py_FatalError (CPython's), found
// at install and after loads until found; 0, 0 while none is known.
extern volatile uintptr_t g_python_module_start;
extern volatile uintptr_t g_python_module_end;

// Install time: sets g_real_sigaction to libc's sigaction, before any
// handler is installed, and looks for CPython's module.
void resolve_real_sigaction();
// Looks for CPython's module (Py_FatalError) if not found yet: at install
// and before each dlopen (a program that loads Python late). Takes the
// loader's lock: never from a signal handler.
void find_python_module();
// libc's sigaction for a call that comes before the install (a library's
// constructor): the loader's lookup, which no signal handler of a program
// can need before faultline's install has run.
SigactionFn sigaction_before_install();

// A shutdown signal's handler (faultline's) restarts interrupted system
// calls exactly when the program's handler behind it does (SA_RESTART):
// the thread it lands on sees the EINTR, or not, it would without
// faultline. Async-signal-safe.
void restart_like_program(int signo);

}  // namespace faultline::core
