// The live dump's signal (FAULTLINE_DUMP_SIGNAL): a signal that makes the
// process write a report of all its threads and go on. Install time only.
// (The timed dump, FAULTLINE_DUMP_AFTER, needs no signal: dump_later.h.)
#pragma once

#include <pthread.h>
#include <signal.h>

namespace faultline::core {

// Makes `signo` the dump signal (0: none), putting back the handler of the
// one it replaces.
void install_dump_signal(int signo);

// The program installed its own disposition for `signo` (through the
// sigaction() interposer): if it is the dump signal, faultline's mark for
// `faultline dump` goes, and the signal is the program's. Defined with the
// interposer (sigaction_hook.cpp): async-signal-safe.
void dump_signal_taken_over(int signo);

// The dump signal faultline's handler is installed for (0: none).
extern volatile int g_dump_signo;
// The mark `faultline dump` looks for before it sends a signal: a page of
// a memfd named "faultline dump signal N", which /proc/PID/maps shows as
// "/memfd:faultline dump signal N (deleted)" while faultline's handler of N
// is installed. SigCgt cannot tell faultline's handler from the program's
// own (a graceful shutdown on SIGUSR2). A memfd, not a named anonymous
// mapping: kernels without CONFIG_ANON_VMA_NAME refuse those. Its
// descriptor is closed at once: only the mapping stays.
extern void* volatile g_dump_mark;

// The dump signal installed now; 0 when there is none.
int installed_dump_signal();

// Holds the dump signal on this thread while in scope, around a dump made
// by a call: a real dump signal arriving meanwhile would find the call's
// claim, its own thread's, and be dropped. Held, it is delivered (and
// written) once the scope ends.
class DumpSignalHeld {
 public:
  DumpSignalHeld() {
    sigset_t held;
    sigemptyset(&held);
    if (int signo = installed_dump_signal(); signo > 0) sigaddset(&held, signo);
    pthread_sigmask(SIG_BLOCK, &held, &saved_);
  }
  ~DumpSignalHeld() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  DumpSignalHeld(const DumpSignalHeld&) = delete;
  DumpSignalHeld& operator=(const DumpSignalHeld&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace faultline::core
