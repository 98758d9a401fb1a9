// Seccomp filters a program installs, read before they go in: a filter that
// would kill or trap a system call faultline's crash path makes (or a
// strict mode, which kills all but four) makes faultline step aside, so the
// crash ends as it would without it. Install-time context (the program's
// thread that sets the filter), never the crash path.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>

namespace faultline::install {

// How a filter answers one system call, as far as faultline is concerned.
enum class SeccompVerdict : int {
  kAllow = 0,   // allowed (ALLOW, LOG)
  kRefuse = 1,  // fails with an error the crash path handles (ERRNO, TRACE)
  kFatal = 2,   // kills the thread or process, or traps (SIGSYS)
  kInvalid = 3  // not a program the kernel would accept
};

// Runs the classic BPF program (n instructions) on one system call's data,
// as the kernel would.
SeccompVerdict seccomp_evaluate(const sock_filter* prog, unsigned n, const seccomp_data& data);

// The first system call of faultline's crash path the program makes fatal,
// or nullptr. `strict`: SECCOMP_MODE_STRICT (only read, write, exit and
// sigreturn).
const char* seccomp_fatal_call(const sock_filter* prog, unsigned n, bool strict);

// Called by the interposers (seccomp_hook.cpp) before the mode is set:
// reads the program at `prog` (a struct sock_fprog in the caller's memory,
// which may be bad: read without faulting) and steps faultline aside when
// the filter would change a crash's fate.
void seccomp_before_set(bool strict, uintptr_t prog);

// Why faultline stepped aside (the system call named), or nullptr. A later
// faultline_install() refuses while it is set.
const char* seccomp_stood_down();

}  // namespace faultline::install
