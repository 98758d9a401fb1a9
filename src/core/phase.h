// The steps of a crash report, by name. The crash owner records which step
// it is in (HandlerState::phase) so that a fault or the watchdog can say
// where it happened, and times each capture phase for the report's
// "phases_ns". One table names them all, and run_phase runs a capture phase
// under the recovery point (phase.cpp).
#pragma once

#include <setjmp.h>
#include <stdint.h>

namespace faultline::core {

enum class Phase : uint8_t {
  kStart,
  // Capture phases, in the order capture_all runs them (the threads phase
  // in two parts: the asking before the unwind, the collecting after the
  // annotations).
  kModules,
  kUnwind,
  kThreads,         // asking the other threads
  kThreadsCollect,  // collecting their answers (reported as part of "threads")
  kSymbols,
  kClassify,
  kPython,
  kAnnotations,
  kCallback,
  kMinidump,
  kDiagnosis,
  // After the capture.
  kWriteReport,
  kTorchelastic,
  kStderrSummary,
  kCount,
};

// Text, not pointers: no relocation of the table at load.
struct PhaseInfo {
  char id[24];       // "unwind": the key in the report's phases_ns and in messages
  char text[72];     // "unwind: fault while unwinding ...": what a fault inside it means
  char timeout[64];  // "python: out of time (watchdog)": cut short or skipped by the watchdog
};

const PhaseInfo& phase_info(Phase p);

// Still worth running once the watchdog's first stage has passed: cheap,
// and they make the report say what happened (collecting the threads'
// answers does not wait then: it keeps what came and notes the rest). The
// symbols and the frames' labels too: a report whose frames are bare
// addresses helps nobody, and they take a millisecond where the phase that
// hung (an unwind, a thread that would not answer, the Python walk) is not
// run again. Reading symbol tables is file I/O like the report's own
// write, under the same second stage.
constexpr bool phase_runs_late(Phase p) {
  return p == Phase::kAnnotations || p == Phase::kDiagnosis || p == Phase::kThreadsCollect ||
         p == Phase::kSymbols || p == Phase::kClassify;
}

struct Capture;

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
