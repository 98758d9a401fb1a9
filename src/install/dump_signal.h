// The live dump's signal and timer (FAULTLINE_DUMP_SIGNAL,
// FAULTLINE_DUMP_AFTER): a signal that makes the process write a report of
// all its threads and go on. Install time only.
#pragma once

namespace faultline::core {

// Makes `signo` the dump signal (0: none), putting back the handler of the
// one it replaces.
void install_dump_signal(int signo);

// Sends `signo` to the process once, `seconds` from now (0: never),
// replacing the timer a previous install armed.
void arm_dump_timer(int seconds, int signo);

// The program installed its own disposition for `signo` (through the
// sigaction() interposer): if it is the dump signal, faultline's mark for
// `faultline dump` goes, and the signal is the program's.
void dump_signal_taken_over(int signo);

// The dump signal installed now; 0 when there is none.
int installed_dump_signal();

}  // namespace faultline::core
