#include "core/stderr_summary.h"

#include "core/crash.h"
#include "core/diagnosis.h"
#include "core/raw_log.h"
#include "core/signals.h"
#include "core/str.h"

namespace faultline::core {

void write_stderr_summary(const Capture& c, const Config&) {
  const SignalInfo* si = find_signal(c.signo);
  const char* desc = si ? si->description : "Fatal signal";
  if (c.python.present) {
    raw_log("Fatal Python error: ", desc, "\n\n");
  } else {
    raw_log("faultline: fatal signal: ", desc, "\n\n");
  }
  raw_log(c.summary, "\n");
  const ThreadCapture* t = crashed_thread(c);
  if (!t) return;
  raw_log("Current thread ");
  raw_write_dec(raw_log_fd(), t->tid);
  raw_log(" (most recent call first):\n");
  const PyThread* py = python_thread_for(c, t->tid);
  // In call order where the Python walker can prove the merge (like the
  // report), else the Python frames first, as faulthandler prints them.
  int cap = t->nframes + (py ? py->nframes : 0);
  FrameRef* refs = nullptr;
  int merged = -1;
  if (py && py->nframes > 0 && t->nframes > 0) {
    refs = g_crash.arena.alloc_array<FrameRef>(static_cast<size_t>(cap));
    if (refs) merged = interleave_frames(*t, *py, c.modules, refs, cap);
  }
  if (merged < 0 && refs) {
    merged = 0;
    for (int i = 0; py && i < py->nframes; ++i) refs[merged++] = {true, i};
    for (int i = 0; i < t->nframes; ++i) refs[merged++] = {false, i};
  }
  int shown = 0;
  int native_shown = 0;
  for (int k = 0; k < (refs ? merged : t->nframes) && shown < 48; ++k, ++shown) {
    char line[1200];
    StrBuf b(line, sizeof line);
    if (refs && refs[k].python) {
      const PyFrame& f = py->frames[refs[k].index];
      b.add("  File \"").add(f.file ? f.file : "???").add("\", line ").add_dec(f.line);
      b.add(" in ").add(f.function ? f.function : "???");
    } else {
      int i = refs ? refs[k].index : k;
      const NativeFrame& f = t->frames[i];
      b.add("  #").add_dec(i).add(" ").add_hex(f.pc).add(" ");
      write_frame_name(&b, c, f);
      if (f.symbol) b.add("+").add_hex(f.symbol_offset);
      ++native_shown;
    }
    b.add("\n");
    raw_write_n(raw_log_fd(), line, b.len());
  }
  shown = native_shown;
  if (t->frames_total > shown) {
    raw_log("  ... ");
    raw_write_dec(raw_log_fd(), t->frames_total - shown);
    raw_log(" more frames in the report\n");
  }
}

}  // namespace faultline::core
