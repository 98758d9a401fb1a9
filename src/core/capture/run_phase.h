// Running one capture phase under the recovery point: a fault or the
// watchdog inside it ends that phase, not the capture. Async-signal-safe.
#pragma once

#include "core/capture.h"
#include "core/phase.h"

namespace faultline::core {

// Runs one capture phase of c under the recovery point and times it: a
// fault inside it is recorded in c->errors (with the phase's text) and the
// capture goes on with the next phase. Once the watchdog's first stage has
// passed, only the phases that run late still run.
void run_phase_fn(Phase p, Capture* c, void (*fn)(void*), void* arg);

template <typename Fn>
void run_phase(Phase p, Capture* c, Fn fn) {
  run_phase_fn(
      p, c, [](void* f) { (*static_cast<Fn*>(f))(); }, &fn);
}

}  // namespace faultline::core
