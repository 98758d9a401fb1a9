#include "core/write/stderr_summary.h"

#include "core/base/raw_log.h"
#include "core/base/signals.h"
#include "core/base/str.h"
#include "core/crash_state.h"
#include "core/diagnosis/diagnosis.h"
#include "core/python/interleave.h"

namespace faultline::core {

void write_escaped_line(const char* s, size_t n, bool newline) {
  char out[512];
  size_t len = 0;
  auto flush = [&] {
    raw_write_n(raw_log_fd(), out, len);
    len = 0;
  };
  auto escape = [&](unsigned char ch) {
    static const char kHex[] = "0123456789abcdef";
    out[len++] = '\\';
    out[len++] = 'x';
    out[len++] = kHex[ch >> 4];
    out[len++] = kHex[ch & 15];
  };
  for (size_t i = 0; i < n; ++i) {
    if (len + 16 > sizeof out) flush();
    unsigned char ch = static_cast<unsigned char>(s[i]);
    unsigned char next = i + 1 < n ? static_cast<unsigned char>(s[i + 1]) : 0;
    unsigned char third = i + 2 < n ? static_cast<unsigned char>(s[i + 2]) : 0;
    bool c1 = ch == 0xc2 && next >= 0x80 && next <= 0x9f;
    bool bidi = ch == 0xe2 && ((next == 0x80 && third >= 0xaa && third <= 0xae) ||
                               (next == 0x81 && third >= 0xa6 && third <= 0xa9));
    if (ch < 0x20 || ch == 0x7f) {
      escape(ch);
    } else if (c1) {
      escape(ch);
      escape(next);
      i += 1;
    } else if (bidi) {
      escape(ch);
      escape(next);
      escape(third);
      i += 2;
    } else {
      out[len++] = static_cast<char>(ch);
    }
  }
  if (newline) out[len++] = '\n';
  flush();
}

void write_stderr_summary(const Capture& c, const Config&) {
  const SignalInfo* si = find_signal(c.signo);
  const char* desc = si ? si->description : "Fatal signal";
  if (c.python.present) {
    raw_log("Fatal Python error: ", desc, "\n\n");
  } else {
    raw_log("faultline: fatal signal: ", desc, "\n\n");
  }
  write_escaped_line(c.summary, str_nlen(c.summary, sizeof c.summary));
  if (c.reraised.present) {
    // As `faultline show` says it: the fault above, which a handler (the
    // program's, or faulthandler's) raised again as this signal.
    const SignalInfo* rs = find_signal(c.reraised.signo);
    raw_log("(re-raised by a handler as ", rs ? rs->name : "another signal",
            "; the original fault is shown)\n");
  }
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
    write_escaped_line(line, b.len());
  }
  shown = native_shown;
  if (t->frames_total > shown) {
    raw_log("  ... ");
    raw_write_dec(raw_log_fd(), t->frames_total - shown);
    raw_log(" more frames in the report\n");
  }
}

}  // namespace faultline::core
