#include "core/phase.h"

#include "core/capture.h"
#include "core/handler_state.h"
#include "core/base/recover.h"
#include "core/base/safe_read.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/signal/watchdog.h"

namespace faultline::core {
namespace {

// Indexed by Phase.
constexpr PhaseInfo kPhases[] = {
    {"start", "start", "start"},
    {"modules", "modules: fault while reading the link map", "modules: out of time (watchdog)"},
    {"unwind", "unwind: fault while unwinding (frames so far kept)",
     "unwind: out of time (watchdog; frames so far kept)"},
    {"threads", "threads: fault while capturing other threads", "threads: out of time (watchdog)"},
    {"threads", "threads: fault while collecting the other threads' stacks",
     "threads: out of time (watchdog); the answers so far kept"},
    {"symbols", "symbols: fault while reading symbol tables", "symbols: out of time (watchdog)"},
    {"classify", "classify: fault while classifying frames", "classify: out of time (watchdog)"},
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

}  // namespace

const PhaseInfo& phase_info(Phase p) {
  int i = static_cast<int>(p);
  return kPhases[i < static_cast<int>(Phase::kCount) ? i : 0];
}

namespace {

void note_watchdog(Capture* c) {
  if (!c->watchdog_noted) {
    c->watchdog_noted = true;
    c->errors.add("watchdog: out of time; the listed phases were skipped or abandoned");
  }
}

}  // namespace

void run_phase_fn(Phase p, Capture* c, void (*fn)(void*), void* arg) {
  const char* text = phase_info(p).text;
  uint64_t start = monotonic_ns();
  g_handler.phase.store(p, std::memory_order_release);
  if (watchdog_fired() && !phase_runs_late(p)) {
    // Out of time: only the cheap phases still run. Said so: not a fault.
    c->errors.add(phase_info(p).timeout);
    note_watchdog(c);
  } else if (ThreadState* ts = thread_state(); !ts) {
    fn(arg);  // every entry taken by a live thread: no recovery point
  } else if (sigsetjmp(ts->recover, 1) == 0) {
    ts->recover_armed = 1;
    fn(arg);
    ts->recover_armed = 0;
  } else {
    ts->recover_armed = 0;
    safe_read_end_reads();  // a pipe read the jump abandoned
    // The phase's text says what was lost; the watchdog's jump is no fault.
    if (watchdog_took_phase()) {
      c->errors.add(phase_info(p).timeout);
      note_watchdog(c);
    } else {
      c->errors.add(text);
      if (watchdog_fired()) note_watchdog(c);
    }
  }
  // A phase run in two parts (the threads: asked, then collected) is one
  // entry under its name, its parts' times added.
  uint64_t took = monotonic_ns() - start;
  for (int i = 0; i < c->nphases; ++i) {
    if (str_eq(phase_info(c->phases[i].phase).id, phase_info(p).id)) {
      c->phases[i].ns += took;
      return;
    }
  }
  if (c->nphases < kMaxPhases) c->phases[c->nphases++] = {p, took};
}

}  // namespace faultline::core
