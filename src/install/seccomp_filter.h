// Seccomp filters a program installs, read before they go in: a filter that
// would kill or trap a system call faultline's crash path makes, or refuse
// one its hand-on needs (or strict mode, which kills all but four), makes
// faultline step aside, so the crash ends as it would without it.
// Install-time context (the program's thread that sets the filter), never
// the crash path.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>

namespace faultline::install {

// How a filter answers one system call, as far as faultline is concerned.
enum class SeccompVerdict : int {
  kAllow = 0,   // allowed (ALLOW, LOG, USER_NOTIF)
  kRefuse = 1,  // fails with an error (ERRNO, TRACE without a tracer)
  kFatal = 2,   // kills the thread or process, or traps (SIGSYS)
};

// seccomp_bpf.cpp: whether the kernel would accept the classic BPF program
// of n instructions as a seccomp filter (its checks of every instruction,
// jump and return), and its answer for one system call's data (a program
// that passed seccomp_valid).
bool seccomp_valid(const sock_filter* prog, unsigned n);
SeccompVerdict seccomp_evaluate(const sock_filter* prog, unsigned n, const seccomp_data& data);

// The first system call of faultline's crash path the program makes fatal
// (or refuses, for the calls that hand a crash on), or nullptr. `strict`:
// SECCOMP_MODE_STRICT (only read, write, exit and sigreturn).
const char* seccomp_fatal_call(const sock_filter* prog, unsigned n, bool strict);

// Called by the interposers (seccomp_hook.cpp) before the mode is set:
// reads the program at `prog` (a struct sock_fprog in the caller's memory,
// which may be bad: read without faulting) and steps faultline aside when
// the filter would change a crash's fate. A filter the kernel will refuse
// (not valid, or no no_new_privs and no CAP_SYS_ADMIN) changes nothing.
void seccomp_before_set(bool strict, uintptr_t prog);

// Why faultline stepped aside (the system call named), or nullptr. A later
// faultline_install() refuses while it is set.
const char* seccomp_stood_down();

}  // namespace faultline::install
