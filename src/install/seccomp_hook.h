// What the syscall()/prctl() interposers (seccomp_hook.cpp) remember of the
// program's own calls.
#pragma once

#include "core/signal/helper_dump.h"

namespace faultline::install {

// The ptracer the program last declared with prctl(PR_SET_PTRACER), which
// the crash path's helper dump puts back (core/signal/helper_dump.h).
using faultline::core::g_program_ptracer;

}  // namespace faultline::install
