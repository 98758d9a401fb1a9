// The `syscall()` and `prctl()` interposers: the two ways a program (or
// libseccomp) sets a seccomp mode, or declares its ptracer (remembered, so
// that a live dump by helper can put it back: seccomp_hook.h). A filter that kills or traps a
// system call faultline's crash path makes would change the job's fate: the crash would end by
// SIGSYS (or, for a thread-killing filter, not end the process at all) instead of the program's own
// signal. Before such a filter goes in, faultline looks at it (install/seccomp_filter.cpp) and
// steps aside if it must. Every other call passes straight to the kernel, as libc's `syscall()` and
// `prctl()` do. faultline's own crash path calls `syscall()` too: this file is checked with it
// (tools/check-signal-safety).
#include "install/seccomp_hook.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "core/base/arch.h"
#include "install/seccomp_filter.h"

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif

namespace {

long forward(long n, const long a[6]) {
  long r = faultline::core::arch_syscall6(n, a[0], a[1], a[2], a[3], a[4], a[5]);
  if (r < 0 && r > -4096) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
}

// A seccomp mode about to be set by seccomp(2) or prctl(PR_SET_SECCOMP).
// Never on the crash path: faultline sets no mode.
// Integer arguments are compared as the kernel reads them (an int passed
// through `...` may leave the register's upper half undefined).
// seccomp(SECCOMP_SET_MODE_STRICT) takes no flags and no program (libseccomp
// asks with flags whether the call exists: the kernel refuses that).
void before_seccomp(long mode_arg, long flags, long prog, bool prctl_form) {
  auto mode = static_cast<unsigned>(mode_arg);
  bool strict = prctl_form ? mode == SECCOMP_MODE_STRICT
                           : mode == SECCOMP_SET_MODE_STRICT && flags == 0 && prog == 0;
  bool filter = prctl_form ? mode == SECCOMP_MODE_FILTER : mode == SECCOMP_SET_MODE_FILTER;
  if (strict || filter) {
    faultline::install::seccomp_before_set(strict, static_cast<uintptr_t>(prog));
  }
}

// prctl(PR_SET_PTRACER, who) made by the program: remembered once the
// kernel took it.
long ptracer_set(long r, const long a[6]) {
  if (r == 0 && static_cast<int>(a[0]) == PR_SET_PTRACER) {
    faultline::install::g_program_ptracer = static_cast<unsigned long>(a[1]);
  }
  return r;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) long syscall(long n, ...) {
  long a[6];
  va_list ap;
  va_start(ap, n);
  for (long& v : a) v = va_arg(ap, long);
  va_end(ap);
  int nr = static_cast<int>(n);
  if (nr == SYS_seccomp) before_seccomp(a[0], static_cast<unsigned>(a[1]), a[2], false);
  if (nr == SYS_prctl && static_cast<int>(a[0]) == PR_SET_SECCOMP)
    before_seccomp(a[1], 0, a[2], true);
  if (nr == SYS_prctl) return ptracer_set(forward(n, a), a);
  return forward(n, a);
}

extern "C" __attribute__((visibility("default"))) int prctl(int option, ...) {
  long a[6] = {option, 0, 0, 0, 0, 0};
  va_list ap;
  va_start(ap, option);
  for (int i = 1; i < 5; ++i) a[i] = static_cast<long>(va_arg(ap, unsigned long));
  va_end(ap);
  if (option == PR_SET_SECCOMP) before_seccomp(a[1], 0, a[2], true);
  return static_cast<int>(ptracer_set(forward(SYS_prctl, a), a));
}
