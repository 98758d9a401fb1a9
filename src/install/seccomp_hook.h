// What the syscall()/prctl() interposers (seccomp_hook.cpp) remember of the
// program's own calls.
#pragma once

namespace faultline::install {

// The ptracer the program last declared with prctl(PR_SET_PTRACER) (0:
// none, the state a process starts in). A live dump by helper lets its
// helper trace the process for the dump only, then puts this one back.
// Linux has no call that reads it, so only a declaration made through
// libc's prctl() or syscall() is known.
extern volatile unsigned long g_program_ptracer;

}  // namespace faultline::install
