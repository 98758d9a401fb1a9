#include "core/capture/run_phase.h"

#include "core/base/recover.h"
#include "core/base/safe_read.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/capture.h"
#include "core/handler_state.h"

namespace faultline::core {

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
