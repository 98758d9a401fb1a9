// Shutdown reports: SIGTERM and SIGINT, reported as kind "shutdown" before
// they take their normal course (the program's own handler, else the
// default action). On by default under torchrun, which stops a job's
// surviving ranks with SIGTERM when one fails: each then leaves the stacks
// it was stopped in. FAULTLINE_SHUTDOWN_REPORTS=0 turns them off, =1 on for
// other launchers. Never over an ignored signal (inherited SIG_IGN), and
// one report per process: the first such signal's.
//
// The program keeps its own view of both signals: the sigaction()
// interposer (install/sigaction_hook.cpp) answers queries with the
// program's handler and records the handlers it sets, while faultline's
// stays in front. So CPython installs its KeyboardInterrupt handler as it
// would, and signal.getsignal() answers as without faultline. Without that
// view (FAULTLINE_STAY_IN_FRONT=0 with the library preloaded), SIGINT is
// left alone and SIGTERM is only reported when asked for.
//
// Use:
//   cfg->signals |= shutdown_init(job_identity_present(), in_front);  // install
//   if (is_shutdown(signo)) ...                                       // crash time
#pragma once

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

namespace faultline::core {

// Install time: remembers which signals are shutdown signals (0: none).
void shutdown_set(uint64_t mask);

// Install time: the signals to add to the handled set. Inline so that
// getenv is compiled into the install-time caller, never into the crash
// path. secure_getenv: a setuid program's caller does not turn it on.
// `program_view_kept`: the program sees its own handlers behind
// faultline's (the interposer stays in front, or faultline was loaded
// after the program's run time had set its handlers).
inline uint64_t shutdown_init(bool in_job, bool program_view_kept) {
  const char* v = secure_getenv("FAULTLINE_SHUTDOWN_REPORTS");
  bool asked = v && *v;
  bool on = asked ? !(v[0] == '0' && v[1] == '\0') : in_job && program_view_kept;
  uint64_t mask = 0;
  if (on) mask |= 1ull << SIGTERM;
  if (on && program_view_kept) mask |= 1ull << SIGINT;
  shutdown_set(mask);
  return mask;
}

// Crash time: a shutdown signal, whoever sent it (a launcher, a terminal).
bool is_shutdown(int signo);

// Crash time: the program ignores this shutdown signal (SIG_IGN behind
// faultline's handler): it is ignored as without faultline, no report.
bool shutdown_ignored(int signo);

// Crash time: a shutdown report was written already (the program's own
// handler took the first signal and went on): later ones are only handed
// on. shutdown_reported() records it.
bool shutdown_was_reported();
void shutdown_reported();

}  // namespace faultline::core
