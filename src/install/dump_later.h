// The timed live dump (faultline_dump_after(), FAULTLINE_DUMP_AFTER, the
// Python package's dump_traceback_later): a watchdog thread of the library,
// started at an arm and gone once nothing is armed, waits for a
// CLOCK_MONOTONIC deadline and then takes the dump faultline_dump_now()
// takes (by a ptrace helper, no thread interrupted; else by signal, saying
// why). No kernel timer and no signal: a timer's signal would interrupt
// whichever thread took it, and the dump by signal every other thread.
// Normal program context, never a signal handler.
#pragma once

#include <stdint.h>

namespace faultline::core {

// Arms the timed dump `delay_ms` from now, replacing one armed before.
// exit_after: end the process with status 1 after the report; with
// wait_tid > 0, only once thread wait_tid of this process has ended too
// (faulthandler's watchdog, which writes its text first). Starts the
// watchdog thread where none runs. Returns 0, -EINVAL (delay 0), or a
// negative errno value from pthread_create.
int dump_later_arm(uint64_t delay_ms, bool exit_after, int wait_tid);

// Disarms the timed dump; one being written is waited for (after it the
// process is gone if it asked to exit). The watchdog thread then ends on
// its own, soon after this returns.
void dump_later_cancel();

// In a fork child: no watchdog thread and nothing armed (as a POSIX timer
// is not inherited). Called from the atfork child handler.
void dump_later_after_fork();

}  // namespace faultline::core
