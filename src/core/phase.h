// The steps of a crash report, by name. The crash owner records which step
// it is in (HandlerState::phase) so that a fault or the watchdog can say
// where it happened, and times each capture phase for the report's
// "phases_ns". One table names them all; capture/run_phase.h runs a
// capture phase under the recovery point.
#pragma once

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
  kReraise,  // the original fault under a handler's re-raise (capture/reraise.h)
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

// Indexed by Phase.
inline constexpr PhaseInfo kPhases[] = {
    {"start", "start", "start"},
    {"modules", "modules: fault while reading the link map", "modules: out of time (watchdog)"},
    {"unwind", "unwind: fault while unwinding (frames so far kept)",
     "unwind: out of time (watchdog; frames so far kept)"},
    {"threads", "threads: fault while capturing other threads", "threads: out of time (watchdog)"},
    {"threads", "threads: fault while collecting the other threads' stacks",
     "threads: out of time (watchdog); the answers so far kept"},
    {"symbols", "symbols: fault while reading symbol tables", "symbols: out of time (watchdog)"},
    {"classify", "classify: fault while classifying frames", "classify: out of time (watchdog)"},
    {"reraise", "reraise: fault while reading the original fault under a re-raise",
     "reraise: out of time (watchdog)"},
    {"python", "python: fault while walking the interpreter", "python: out of time (watchdog)"},
    {"annotations", "annotations: fault while copying annotations",
     "annotations: out of time (watchdog)"},
    {"callback", "callback: fault inside the user callback", "callback: out of time (watchdog)"},
    {"minidump", "minidump: fault or timeout while writing the minidump; no minidump",
     "minidump: out of time (watchdog); no minidump"},
    {"diagnosis", "diagnosis: fault while diagnosing", "diagnosis: out of time (watchdog)"},
    {"writing the report", "writing the report", "writing the report"},
    {"torchelastic error file", "torchelastic error file", "torchelastic error file"},
    {"stderr summary", "stderr summary", "stderr summary"},
};
static_assert(sizeof kPhases / sizeof kPhases[0] == static_cast<int>(Phase::kCount),
              "one entry per Phase");

inline constexpr const PhaseInfo& phase_info(Phase p) {
  int i = static_cast<int>(p);
  return kPhases[i < static_cast<int>(Phase::kCount) ? i : 0];
}

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
         p == Phase::kSymbols || p == Phase::kClassify || p == Phase::kReraise;
}

}  // namespace faultline::core
