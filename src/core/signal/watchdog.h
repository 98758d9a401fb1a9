// The watchdog, in two stages, on a process-directed alarm (the owner may
// be blocking every signal: libunwind does around the loader's lock).
//  - First expiry: the owner abandons the capture phase that hangs and goes
//    on to write the report, skipping the remaining slow phases (the cheap
//    ones still run: phase_runs_late). If the
//    alarm lands on another thread, that thread forwards it to the owner.
//  - Second expiry, FAULTLINE_WATCHDOG + 2 s: if the owner never reached
//    the report (stuck with signals blocked), another thread writes it from
//    what was captured so far; then the process ends with its signal.
// Who writes the report is settled by one compare-and-swap on
// HandlerState::writer, so never both.
#pragma once

#include <stdint.h>

namespace faultline::core {

// Called by the crash owner around its capture and report (no-ops when
// seconds <= 0: the watchdog is off).
void arm_watchdog(int seconds);
void disarm_watchdog(int seconds);

// What the capture phases ask of the watchdog (watchdog_fired and the
// like) reads its state only: handler_state.h.

}  // namespace faultline::core
