// Shutdown reports: SIGTERM and SIGINT, reported as kind "shutdown" before
// they take their normal course (the program's own handler, else the
// default action). On by default under torchrun, which stops a job's
// surviving ranks with SIGTERM when one fails: each then leaves the stacks
// it was stopped in. FAULTLINE_SHUTDOWN_REPORTS=0 turns them off, =1 on for
// other launchers. Never over an ignored signal (inherited SIG_IGN), and
// one report per process: the first such signal's.
//
// By default only in the rank itself, the process torchrun's agent
// started: its descendants (DataLoader workers, a forkserver, a tool the
// script runs) inherit the job identity, and torchrun signals the rank's
// whole process group. One started by exec finds its parent in the same
// job at install (install/job_parent.h); one started by fork gives both
// signals back to the program's handlers in its fork handler
// (shutdown_after_fork). FAULTLINE_SHUTDOWN_REPORTS=1 reports in every
// process.
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
//   cfg->signals |= shutdown_init(in_job, in_front, parent_in_same_job, cfg->signals);
//   shutdown_after_fork();          // fork child
//   if (is_shutdown(signo)) ...     // crash time
#pragma once

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

namespace faultline::core {

// Install time: remembers which signals are shutdown signals (0: none);
// `rank_only`: those that fork children give back (shutdown_after_fork).
void shutdown_set(uint64_t mask, uint64_t rank_only);

// Install time: the signals to add to the handled set. Inline so that
// getenv is compiled into the install-time caller, never into the crash
// path. secure_getenv: a setuid program's caller does not turn it on.
// `program_view_kept`: the program sees its own handlers behind
// faultline's (the interposer stays in front, or faultline was loaded
// after the program's run time had set its handlers). `descendant`: asked
// only for the default under a job (it reads the parent's environment).
// `crash_signals`: the fatal signals asked for, which fork children keep.
inline uint64_t shutdown_init(bool in_job, bool program_view_kept, bool (*descendant)(),
                              uint64_t crash_signals) {
  const char* v = secure_getenv("FAULTLINE_SHUTDOWN_REPORTS");
  bool asked = v && *v;
  bool on = asked ? !(v[0] == '0' && v[1] == '\0') : in_job && program_view_kept && !descendant();
  uint64_t mask = 0;
  if (on) mask |= 1ull << SIGTERM;
  if (on && program_view_kept) mask |= 1ull << SIGINT;
  shutdown_set(mask, asked ? 0 : mask & ~crash_signals);
  return mask;
}

// In a fork child (fork's child handler, before the program runs again):
// where shutdown reports are the rank's alone, gives the shutdown signals
// back to the program's handlers (as if faultline had never handled them)
// and stops reporting them. Returns the signals given back.
uint64_t shutdown_after_fork();

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
