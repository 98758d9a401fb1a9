// Shutdown reports: SIGTERM, reported as kind "shutdown" before it takes
// its normal course (the program's own handler, else the default action).
// FAULTLINE_SHUTDOWN_REPORTS=1 turns it on: under torchrun, which stops a
// job's surviving ranks with SIGTERM when one fails, each then leaves the
// stacks it was stopped in. Never over an ignored SIGTERM (inherited SIG_IGN).
//
// Not SIGINT: CPython installs its KeyboardInterrupt handler only over the
// default disposition, so with faultline's handler there first a program's
// `except KeyboardInterrupt` cleanup would never run.
//
// Use:
//   cfg->signals |= shutdown_init(job_identity_present());  // install time
//   if (is_shutdown(signo)) ...                              // crash time
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
inline uint64_t shutdown_init(bool in_job) {
  const char* v = secure_getenv("FAULTLINE_SHUTDOWN_REPORTS");
  // Off unless asked for, under torchrun too: faultline's SIGTERM handler
  // is a C handler to Python, so signal.getsignal(SIGTERM) says None and a
  // library that saves and restores the handler fails.
  (void)in_job;
  bool on = v && *v && !(v[0] == '0' && v[1] == '\0');
  uint64_t mask = on ? 1ull << SIGTERM : 0;
  shutdown_set(mask);
  return mask;
}

// Crash time: a shutdown signal, whoever sent it (a launcher, a terminal).
bool is_shutdown(int signo);

// Crash time: the program ignores this shutdown signal (SIG_IGN behind
// faultline's handler): it is ignored as without faultline, no report.
bool shutdown_ignored(int signo);

}  // namespace faultline::core
