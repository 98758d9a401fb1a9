#include "core/report_writer.h"

#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/classify.h"
#include "core/crash.h"
#include "core/diagnosis.h"
#include "core/json_writer.h"
#include "core/safe_read.h"
#include "core/scrub.h"
#include "core/signals.h"
#include "core/str.h"
#include "core/sys.h"
#include "core/terminate.h"
#include "core/time_fmt.h"

#ifndef FAULTLINE_VERSION
#define FAULTLINE_VERSION "0.0.0"
#endif

namespace faultline::core {
namespace {

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
    case Unwinder::kNone:
      break;
  }
  return "none";
}

void write_registers(JsonWriter& w, const ucontext_t& uc) {
  struct Reg {
    const char* name;
    int index;
  };
  static const Reg kRegs[] = {
      {"rax", REG_RAX}, {"rbx", REG_RBX},       {"rcx", REG_RCX},         {"rdx", REG_RDX},
      {"rsi", REG_RSI}, {"rdi", REG_RDI},       {"rbp", REG_RBP},         {"rsp", REG_RSP},
      {"r8", REG_R8},   {"r9", REG_R9},         {"r10", REG_R10},         {"r11", REG_R11},
      {"r12", REG_R12}, {"r13", REG_R13},       {"r14", REG_R14},         {"r15", REG_R15},
      {"rip", REG_RIP}, {"eflags", REG_EFL},    {"err", REG_ERR},         {"trapno", REG_TRAPNO},
      {"cr2", REG_CR2}, {"csgsfs", REG_CSGSFS}, {"oldmask", REG_OLDMASK},
  };
  w.key("registers");
  w.begin_object();
  for (const Reg& r : kRegs) {
    w.field_hex(r.name, static_cast<uint64_t>(uc.uc_mcontext.gregs[r.index]));
  }
  w.end_object();
}

void write_annotations(JsonWriter& w, const AnnotationView* a, int n) {
  w.key("annotations");
  w.begin_object();
  for (int i = 0; i < n; ++i) {
    w.key(a[i].key);
    w.str(a[i].value);
  }
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

void write_native_frame(JsonWriter& w, const Capture& c, const NativeFrame& f) {
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
  if (py) {
    w.field_bool("holds_gil", py->holds_gil);
    w.field_num("python_frames_total", py->frames_total);
    if (py->error) w.field_str("python_error", py->error);
  }
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
  if (merged >= 0) {
    for (int i = 0; i < merged; ++i) {
      if (refs[i].python) {
        write_python_frame(w, py->frames[refs[i].index]);
      } else {
        write_native_frame(w, c, t.frames[refs[i].index]);
      }
    }
  } else {
    for (int i = 0; i < t.nframes; ++i) write_native_frame(w, c, t.frames[i]);
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

void write_process(JsonWriter& w, const Capture& c, const Config& cfg) {
  w.key("process");
  w.begin_object();
  w.field_num("pid", c.pid);
  w.field_num("ppid", static_cast<int64_t>(syscall(SYS_getppid)));
  w.field_num("uid", static_cast<int64_t>(syscall(SYS_getuid)));
  const char* exe = nullptr;
  for (int i = 0; i < c.modules.count; ++i) {
    if (c.modules.items[i].is_main) exe = c.modules.items[i].path;
  }
  static char exe_buf[4096];
  if (!exe) {
    long n = readlink("/proc/self/exe", exe_buf, sizeof exe_buf - 1);
    exe_buf[n > 0 ? n : 0] = '\0';
    exe = exe_buf;
  }
  w.str_exact("executable", exe, str_len(exe));
  w.key("argv");
  w.begin_array();
  // Secrets (--api-key=..., --password X, URL passwords) are filtered as
  // they are written: src/core/scrub.h, doc/security.md.
  ArgScrubber scrubber(cfg.scrub_keys);
  static char scrubbed[8192 + 64];
  for (int off = 0; off < cfg.argv_len;) {
    size_t n = str_nlen(cfg.argv + off, static_cast<size_t>(cfg.argv_len - off));
    if (cfg.scrub) {
      w.str_n(scrubbed, scrubber.scrub(cfg.argv + off, n, scrubbed, sizeof scrubbed));
    } else {
      w.str_n(cfg.argv + off, n);
    }
    off += static_cast<int>(n) + 1;
  }
  w.end_array();
  static char cwd[4096];
  long n = syscall(SYS_getcwd, cwd, sizeof cwd);
  if (n > 0) {
    w.str_exact("cwd", cwd, str_len(cwd));
  } else {
    w.key("cwd");
    w.null();
  }
  struct utsname u;
  if (uname(&u) == 0) {
    w.field_str("hostname", u.nodename);
    w.key("os");
    w.begin_object();
    w.field_str("sysname", u.sysname);
    w.field_str("release", u.release);
    w.field_str("version", u.version);
    w.field_str("machine", u.machine);
    w.end_object();
  }
  char ts[32];
  format_iso8601(ts, cfg.start_sec, cfg.start_nsec);
  w.field_str("start_time", ts);
  w.end_object();
}

void write_signal(JsonWriter& w, const Capture& c) {
  const SignalInfo* si = find_signal(c.signo);
  const SignalCodeInfo* code = find_signal_code(c.signo, c.info.si_code);
  w.key("signal");
  w.begin_object();
  w.field_num("number", c.signo);
  w.field_str("name", si ? si->name : "UNKNOWN");
  w.field_num("code", c.info.si_code);
  w.field_str("code_name", code ? code->name : "UNKNOWN");
  char desc[256];
  StrBuf d(desc, sizeof desc);
  if (code) {
    d.add(code->name).add(": ").add(code->description);
  } else {
    d.add(si ? si->description : "unknown signal");
  }
  w.field_str("description", desc);
  if (has_fault_address(c.signo, c.info.si_code)) {
    w.field_hex("fault_address", reinterpret_cast<uintptr_t>(c.info.si_addr));
  } else {
    w.key("fault_address");
    w.null();
  }
  if (signal_sent_by_process(c.info.si_code)) {
    w.field_num("sender_pid", c.info.si_pid);
    w.field_num("sender_uid", c.info.si_uid);
  }
  w.end_object();
}

// An uncaught C++ exception: its type and what().
void write_exception(JsonWriter& w, const Capture& c) {
  w.key("exception");
  w.begin_object();
  if (g_terminate.has_exception) {
    w.field_str("type", g_terminate.type);
    if (g_terminate.message[0] || g_terminate.message_truncated) {
      w.str_exact("message", g_terminate.message, str_len(g_terminate.message));
      if (g_terminate.message_truncated) w.field_bool("message_truncated", true);
    }
  } else {
    w.key("type");
    w.null();
  }
  // An uncaught exception terminates before any unwinding, so the stack
  // still holds the throw site when __cxa_throw is on it.
  bool throw_site = false;
  const ThreadCapture* ct = crashed_thread(c);
  for (int i = 0; ct && i < ct->nframes && !throw_site; ++i) {
    throw_site = ct->frames[i].symbol && str_eq(ct->frames[i].symbol, "__cxa_throw");
  }
  w.field_str("stack", throw_site ? "throw site" : "terminate (the throw site was unwound)");
  w.end_object();
}

void write_python(JsonWriter& w, const Capture& c) {
  w.key("python");
  if (c.python.present) {
    w.begin_object();
    w.field_str("version", c.python.version);
    w.field_str("implementation", "cpython");
    w.field_hex("runtime", c.python.runtime);
    w.field_num("threads_total", c.python.threads_total);
    w.end_object();
  } else {
    w.null();
  }
}

// The crashed thread, and crashes of other threads meanwhile.
void write_crashed_tid(JsonWriter& w, const Capture& c) {
  w.key("crashed_tid");
  if (c.kind != CaptureKind::kDump) {
    w.num(c.tid);
  } else {
    w.null();
    w.field_num("dumping_tid", c.tid);
  }
  w.key("other_crashes");
  w.begin_array();
  for (int i = 0; i < g_nsecondary && i < kMaxSecondary; ++i) {
    const SecondaryCrash& s = g_secondary[i];
    if (!__atomic_load_n(&s.valid, __ATOMIC_ACQUIRE)) continue;
    const SignalInfo* ssi = find_signal(s.signo);
    w.begin_object();
    w.field_num("tid", s.tid);
    w.field_str("signal", ssi ? ssi->name : "UNKNOWN");
    w.field_num("code", s.code);
    w.field_hex("pc", s.pc);
    w.field_hex("fault_address", s.addr);
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
    w.field_bool("holds_gil", py.holds_gil);
    w.field_num("python_frames_total", py.frames_total);
    if (py.error) w.field_str("python_error", py.error);
    w.key("frames");
    w.begin_array();
    for (int k = 0; k < py.nframes; ++k) write_python_frame(w, py.frames[k]);
    w.end_array();
    w.end_object();
  }
  w.end_array();
}

void write_modules(JsonWriter& w, const Capture& c) {
  w.key("modules");
  w.begin_array();
  for (int i = 0; i < c.modules.count; ++i) {
    const Module& m = c.modules.items[i];
    w.begin_object();
    w.str_exact("path", m.path, str_len(m.path));
    w.field_hex("base", m.base);
    w.field_hex("size", m.end - m.base);
    w.field_hex("load_bias", m.bias);
    char id[72];
    size_t n = fmt_hex_bytes(id, m.build_id, m.build_id_len);
    w.key("build_id");
    w.str_n(id, n);
    if (m.is_main) w.field_bool("main", true);
    if (m.is_vdso) w.field_bool("vdso", true);
    w.end_object();
  }
  w.end_array();
}

// What the application recorded: annotations, callback items, breadcrumbs.
void write_app_data(JsonWriter& w, const Capture& c) {
  write_annotations(w, c.annotations, c.nannotations);
  if (c.ncallback_items > 0) {
    w.key("callback");
    w.begin_object();
    for (int i = 0; i < c.ncallback_items; ++i) {
      w.key(c.callback_items[i].key);
      w.str(c.callback_items[i].value);
    }
    w.end_object();
  }
  w.key("breadcrumbs");
  w.begin_array();
  for (int i = 0; i < c.nbreadcrumbs; ++i) {
    w.begin_object();
    char bts[32];
    format_iso8601(bts, c.breadcrumbs[i].time_sec, c.breadcrumbs[i].time_nsec);
    w.field_str("time", bts);
    w.str_exact("message", c.breadcrumbs[i].message, str_len(c.breadcrumbs[i].message));
    w.end_object();
  }
  w.end_array();
}

// About the capture itself: timings, the SafeReader method, the arena, errors.
void write_faultline(JsonWriter& w, const Capture& c) {
  w.key("faultline");
  w.begin_object();
  w.field_str("version", FAULTLINE_VERSION);
  w.key("capture_ns");
  w.unum(monotonic_ns() - c.start_ns);
  w.key("phases_ns");
  w.begin_object();
  for (int i = 0; i < c.nphases; ++i) {
    w.key(phase_info(c.phases[i].phase).id);
    w.unum(c.phases[i].ns);
  }
  // Part of "threads": waiting for the other threads to answer the signal.
  if (c.threads_park_ns) {
    w.key("threads_park");
    w.unum(c.threads_park_ns);
  }
  w.end_object();
  if (c.minidump_file[0]) {
    w.key("minidump_bytes");
    w.unum(c.minidump_bytes);
  }
  w.field_str("safe_read", safe_read_method_name());
  w.field_str("modules_from", c.modules_from_snapshot ? "snapshot" : "link map");
  w.key("arena_bytes_used");
  w.unum(g_crash.arena.used());
  w.key("errors");
  w.begin_array();
  for (int i = 0; i < c.errors.count; ++i) w.str(c.errors.items[i]);
  if (c.modules.truncated) w.str("modules: table full, later modules left out");
  if (g_crash.arena.exhausted()) w.str("arena: exhausted, some data left out");
  w.end_array();
  w.end_object();
}

}  // namespace

// The output buffer is static, not on the (possibly small) signal stack; only
// the thread that owns the crash writes a report.
char g_out_buf[16384];

bool write_json_report(const Capture& c, const Config& cfg, int fd, int* err) {
  FdSink sink(fd, g_out_buf, sizeof g_out_buf);
  JsonWriter w(&sink);
  w.begin_object();
  w.field_str("schema", "faultline/1");
  w.field_str("kind", capture_kind_name(c.kind));
  char ts[32];
  format_iso8601(ts, c.time_sec, c.time_nsec);
  w.field_str("timestamp", ts);
  write_signal(w, c);
  if (c.kind == CaptureKind::kTerminate) write_exception(w, c);
  w.key("diagnosis");
  w.begin_object();
  w.field_str("summary", c.summary);
  w.field_str("category", c.category);
  w.field_str("signature", c.signature);
  w.end_object();

  write_process(w, c, cfg);
  write_python(w, c);
  write_crashed_tid(w, c);
  write_threads(w, c);
  write_modules(w, c);
  // The minidump beside this report (same directory), or null.
  w.key("minidump");
  if (c.minidump_file[0]) {
    w.str(c.minidump_file);
  } else {
    w.null();
  }
  write_app_data(w, c);
  write_faultline(w, c);
  w.end_object();
  sink.put('\n');
  sink.flush();
  *err = sink.error();
  return !sink.failed();
}

}  // namespace faultline::core
