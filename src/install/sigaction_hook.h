// The sigaction() interposer (FAULTLINE_STAY_IN_FRONT, on by default): keeps faultline's
// handlers in front of the program's, and finds libc's sigaction for
// faultline's own calls (core/base/sigaction_real.h). Install time.
#pragma once

namespace faultline::core {

extern volatile int g_stay_in_front;
// Also for the shutdown signals (SIGTERM, SIGINT): only when
// FAULTLINE_STAY_IN_FRONT=1 is set, not by default (a program's graceful
// shutdown handler is its own business).
extern volatile int g_stay_in_front_of_shutdown;
// Sets g_real_sigaction to libc's sigaction, before any handler is installed.
void resolve_real_sigaction();

}  // namespace faultline::core
