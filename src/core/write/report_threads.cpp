#include "core/write/report_threads.h"

#include "core/base/arch.h"
#include "core/base/str.h"
#include "core/base/time_fmt.h"
#include "core/crash_state.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/diagnosis.h"
#include "core/python/interleave.h"

namespace faultline::core {

const char* unwinder_name(Unwinder u) {
  switch (u) {
    case Unwinder::kLibunwind:
      return "libunwind";
    case Unwinder::kFramePointer:
      return "frame-pointer";
    case Unwinder::kLibunwindThenFp:
      return "libunwind+frame-pointer";
    case Unwinder::kCfi:
      return "cfi";
    case Unwinder::kCfiThenLibunwind:
      return "cfi+libunwind";
    case Unwinder::kCfiThenFp:
      return "cfi+frame-pointer";
    case Unwinder::kNone:
      break;
  }
  return "none";
}

namespace {

void write_registers(JsonWriter& w, const ucontext_t& uc) {
  ArchReg regs[kArchRegMax];
  int n = uc_registers(uc, regs);
  w.key("registers");
  w.begin_object();
  for (int i = 0; i < n; ++i) w.field_hex(regs[i].name, regs[i].value);
  w.end_object();
}

// The modules' paths as the frames write them: each checked once per
// report, not escaped again for each of its (up to 13,000) frames.
struct PathInfo {
  uint32_t len;
  bool plain;
};
constexpr int kPathSlots = 1024;
PathInfo g_paths[kPathSlots];

void prepare_paths(const Capture& c) {
  for (int i = 0; i < c.modules.count && i < kPathSlots; ++i) {
    const char* p = c.modules.items[i].path;
    size_t n = p ? str_len(p) : 0;
    g_paths[i] = {static_cast<uint32_t>(n), p && JsonWriter::is_plain(p, n)};
  }
}

// The last symbol a frame wrote: a thread's frames repeat a few names
// (recursion, a loop of calls), each checked for escaping once in a row.
struct SymbolSeen {
  const char* symbol = nullptr;
  size_t len = 0;
  bool plain = false;
};

// Appends s (n bytes) at *p.
inline void put_at(char** p, const char* s, size_t n) {
  __builtin_memcpy(*p, s, n);
  *p += n;
}
template <size_t N>
inline void put_at(char** p, const char (&lit)[N]) {
  put_at(p, lit, N - 1);
}

// The common frame, whose module path and symbol need no escaping, as one
// piece written in place: a report of 256 threads has some 13,000 frames,
// and field by field each cost a dozen calls. The same bytes as the general
// path below. False when the frame is not such a frame or the writer has no
// room: then nothing was written.
bool write_plain_native_frame(JsonWriter& w, const Capture& c, const NativeFrame& f,
                              SymbolSeen* seen) {
  constexpr size_t kMaxText = 1024;  // path or symbol: longer ones take the general path
  if (!f.origin || f.module < 0 || f.module >= kPathSlots || !g_paths[f.module].plain ||
      g_paths[f.module].len > kMaxText) {
    return false;
  }
  if (f.symbol && f.symbol != seen->symbol) {
    seen->symbol = f.symbol;
    seen->len = str_nlen(f.symbol, kMaxText + 1);
    seen->plain = seen->len <= kMaxText && JsonWriter::is_plain(f.symbol, seen->len);
  }
  if (f.symbol && !seen->plain) return false;
  const char* origin = f.origin->id;
  const size_t origin_len = str_nlen(origin, sizeof f.origin->id);
  if (origin_len == sizeof f.origin->id || !JsonWriter::is_plain(origin, origin_len)) return false;
  const Module& m = c.modules.items[f.module];
  const size_t path_len = g_paths[f.module].len;
  const size_t sym_len = f.symbol ? seen->len : 0;
  // The fixed text (keys, quotes, "true"; ~130 bytes) and three or four
  // hex numbers of up to 18 bytes each.
  char* start = w.reserve_value(256 + origin_len + path_len + sym_len);
  if (!start) return false;
  char* p = start;
  put_at(&p, "{\"kind\":\"native\",\"origin\":\"");
  put_at(&p, origin, origin_len);
  put_at(&p, "\",\"pc\":\"");
  p += fmt_hex(p, f.pc);
  put_at(&p, "\",\"sp\":\"");
  p += fmt_hex(p, f.sp);
  put_at(&p, "\"");
  if (f.signal_frame) put_at(&p, ",\"signal_frame\":true");
  put_at(&p, ",\"module\":\"");
  put_at(&p, m.path, path_len);
  put_at(&p, "\",\"module_offset\":\"");
  p += fmt_hex(p, f.pc - m.bias);
  put_at(&p, "\"");
  if (f.symbol) {
    put_at(&p, ",\"symbol\":\"");
    put_at(&p, f.symbol, sym_len);
    put_at(&p, "\",\"symbol_offset\":\"");
    p += fmt_hex(p, f.symbol_offset);
    put_at(&p, "\"");
  }
  put_at(&p, "}");
  w.commit_value(static_cast<size_t>(p - start));
  return true;
}

void write_native_frame(JsonWriter& w, const Capture& c, const NativeFrame& f, SymbolSeen* seen) {
  if (write_plain_native_frame(w, c, f, seen)) return;
  w.begin_object();
  w.field_str("kind", "native");
  w.field_str(
      "origin",
      f.origin
          ? f.origin->id
          : classify_native(f.module >= 0 ? c.modules.items[f.module].path : nullptr, f.symbol).id);
  w.field_hex("pc", f.pc);
  w.field_hex("sp", f.sp);
  if (f.signal_frame) w.field_bool("signal_frame", true);
  if (f.module >= 0) {
    const Module& m = c.modules.items[f.module];
    if (f.module < kPathSlots && g_paths[f.module].plain) {
      w.field_plain("module", m.path, g_paths[f.module].len);
    } else {
      w.str_exact("module", m.path, str_len(m.path));
    }
    w.field_hex("module_offset", f.pc - m.bias);
  } else {
    w.key("module");
    w.null();
  }
  if (f.symbol) {
    w.str_exact("symbol", f.symbol, str_len(f.symbol));
    w.field_hex("symbol_offset", f.symbol_offset);
  }
  w.end_object();
}

void write_python_frame(JsonWriter& w, const PyFrame& f) {
  w.begin_object();
  w.field_str("kind", "python");
  w.field_str("origin", classify_python(f.file, f.function).id);
  w.str_exact("file", f.file ? f.file : "", str_len(f.file));
  w.field_num("line", f.line);
  w.str_exact("function", f.function ? f.function : "", str_len(f.function));
  if (f.qualname) w.str_exact("qualname", f.qualname, str_len(f.qualname));
  w.end_object();
}

// A thread's Python fields; pthread_id (PyThreadState.thread_id, what
// threading.get_ident() gives) and python_thread (its place in the
// interpreter's list) let `faultline show --faulthandler` print the threads
// as faulthandler does.
void write_python_thread_fields(JsonWriter& w, const Capture& c, const PyThread& py) {
  w.field_bool("holds_gil", py.holds_gil);
  w.field_num("python_frames_total", py.frames_total);
  if (py.error) w.field_str("python_error", py.error);
  w.field_hex("pthread_id", py.thread_id);
  w.field_num("python_thread", &py - c.python.threads);
}

void write_thread(JsonWriter& w, const Capture& c, const ThreadCapture& t) {
  w.begin_object();
  w.field_num("tid", t.tid);
  w.str_exact("name", t.name, str_len(t.name));
  w.field_bool("crashed", t.crashed);
  w.field_bool("captured", t.captured);
  if (t.note) w.field_str("note", t.note);
  w.field_str("unwinder", unwinder_name(t.unwinder));
  w.field_num("frames_total", t.frames_total);
  w.field_bool("frames_truncated", t.frames_total > t.nframes);
  const PyThread* py = python_thread_for(c, t.tid);
  if (py) write_python_thread_fields(w, c, *py);
  // Native and Python frames in call order where the walker can prove the
  // merge; otherwise the native frames, then the Python ones, and
  // "interleaved": false says so.
  int merged = -1;
  FrameRef* refs = nullptr;
  int cap = t.nframes + (py ? py->nframes : 0);
  if (py && py->nframes > 0 && t.nframes > 0) {
    refs = g_crash.arena.alloc_array<FrameRef>(static_cast<size_t>(cap));
    if (refs) merged = interleave_frames(t, *py, c.modules, refs, cap);
  }
  w.key("frames");
  w.begin_array();
  SymbolSeen seen;
  if (merged >= 0) {
    for (int i = 0; i < merged; ++i) {
      if (refs[i].python) {
        write_python_frame(w, py->frames[refs[i].index]);
      } else {
        write_native_frame(w, c, t.frames[refs[i].index], &seen);
      }
    }
  } else {
    for (int i = 0; i < t.nframes; ++i) write_native_frame(w, c, t.frames[i], &seen);
    for (int i = 0; py && i < py->nframes; ++i) write_python_frame(w, py->frames[i]);
  }
  w.end_array();
  if (py) w.field_bool("interleaved", merged >= 0);
  if (&t == &c.threads[0]) write_annotations(w, c.thread_annotations, c.nthread_annotations);
  if (t.proc_state) {
    char st[2] = {t.proc_state, '\0'};
    w.field_str("state", st);
  }
  if (t.wchan[0]) w.field_str("wchan", t.wchan);
  if (t.crashed && c.have_uc) write_registers(w, c.uc);
  w.end_object();
}

}  // namespace

void write_annotations(JsonWriter& w, const AnnotationView* a, int n) {
  w.key("annotations");
  w.begin_object();
  for (int i = 0; i < n; ++i) {
    w.key(a[i].key);
    w.str(a[i].value);
  }
  w.end_object();
}

void write_breadcrumbs(JsonWriter& w, const BreadcrumbView* b, int n) {
  w.key("breadcrumbs");
  w.begin_array();
  for (int i = 0; i < n; ++i) {
    w.begin_object();
    char bts[32];
    format_iso8601(bts, b[i].time_sec, b[i].time_nsec);
    w.field_str("time", bts);
    w.str_exact("message", b[i].message, str_len(b[i].message));
    w.end_object();
  }
  w.end_array();
}

// Every thread, then Python threads whose native stack was not captured.
void write_threads(JsonWriter& w, const Capture& c) {
  w.field_num("threads_total", c.threads_total > c.nthreads ? c.threads_total : c.nthreads);
  w.field_num("threads_cut", c.threads_cut);
  w.key("threads");
  w.begin_array();
  prepare_paths(c);
  for (int i = 0; i < c.nthreads; ++i) write_thread(w, c, c.threads[i]);
  // Python threads whose native stack was not captured still get their
  // Python frames.
  for (int i = 0; c.python.present && i < c.python.nthreads; ++i) {
    const PyThread& py = c.python.threads[i];
    bool seen = false;
    for (int k = 0; k < c.nthreads && !seen; ++k) seen = c.threads[k].tid == py.native_tid;
    if (seen) continue;
    w.begin_object();
    w.field_num("tid", py.native_tid);
    w.field_bool("crashed", false);
    w.field_bool("captured", false);
    w.field_str("note", "native frames not captured");
    write_python_thread_fields(w, c, py);
    w.key("frames");
    w.begin_array();
    for (int k = 0; k < py.nframes; ++k) write_python_frame(w, py.frames[k]);
    w.end_array();
    w.end_object();
  }
  w.end_array();
}

}  // namespace faultline::core
