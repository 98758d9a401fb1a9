// Per-thread recovery from a fault inside faultline's own handlers: a capture
// step runs with t_recover armed; if it faults (a corrupt pointer that got
// past the SafeReader, a corrupt stack under libunwind), the fatal-signal
// handler jumps back here instead of recursing or killing a live process.
#pragma once

#include <setjmp.h>

namespace faultline::core {

extern __thread sigjmp_buf t_recover __attribute__((tls_model("initial-exec")));
extern __thread volatile int t_recover_armed __attribute__((tls_model("initial-exec")));

}  // namespace faultline::core
