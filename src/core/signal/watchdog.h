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

constexpr int kWatchdogGraceSeconds = 2;

// Called by the crash owner around its capture and report (no-ops when
// seconds <= 0: the watchdog is off).
void arm_watchdog(int seconds);
void disarm_watchdog(int seconds);

// True once the watchdog's first stage has passed.
bool watchdog_fired();

// True once, at the recovery point the first stage jumped to: that jump
// was the watchdog's, not a fault's.
bool watchdog_took_phase();

// When the first stage came (CLOCK_MONOTONIC ns), 0 before.
uint64_t watchdog_fired_ns();

// How long the symbols may still take once the first stage has come: a
// quarter of the grace period, the rest is the report's.
constexpr uint64_t kLateSymbolsNs = 500ull * 1000 * 1000;

}  // namespace faultline::core
