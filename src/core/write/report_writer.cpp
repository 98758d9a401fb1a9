#include "core/write/report_writer.h"

#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/base/arch.h"
#include "core/base/safe_read.h"
#include "core/base/signals.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/base/time_fmt.h"
#include "core/crash_state.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/diagnosis.h"
#include "core/modules/modules.h"
#include "core/write/job_identity.h"
#include "core/write/json_writer.h"
#include "core/write/report_threads.h"
#include "core/write/scrub.h"

#ifndef FAULTLINE_VERSION
#define FAULTLINE_VERSION "0.0.0"
#endif

namespace faultline::core {
namespace {

void write_process(JsonWriter& w, const Capture& c, const Config& cfg) {
  w.key("process");
  w.begin_object();
  w.field_num("pid", c.pid);
  w.field_num("ppid", static_cast<int64_t>(syscall(SYS_getppid)));
  w.field_num("uid", static_cast<int64_t>(syscall(SYS_getuid)));
  w.field_str("arch", kArchName);
  const char* exe = nullptr;
  for (int i = 0; i < c.modules.count; ++i) {
    if (c.modules.items[i].is_main) exe = c.modules.items[i].path;
  }
  // No main module listed: the path as the module walk would name it
  // (not /proc/self/exe, which is the loader for `ld.so prog`).
  if (!exe) exe = modules_exe_path();
  w.str_exact("executable", exe, str_len(exe));
  if (cfg.exec_name[0]) w.str_exact("exec_name", cfg.exec_name, str_len(cfg.exec_name));
  w.key("argv");
  w.begin_array();
  // Secrets (--api-key=..., --password X, URL passwords) are filtered as
  // they are written: src/core/write/scrub.h, doc/security.md.
  ArgScrubber scrubber(cfg.scrub_keys);
  static char scrubbed[8192 + 64];
  for (int off = 0; off < cfg.argv_len;) {
    size_t n = str_nlen(cfg.argv + off, static_cast<size_t>(cfg.argv_len - off));
    if (!cfg.keep_secrets) {
      w.str_n(scrubbed, scrubber.scrub(cfg.argv + off, n, scrubbed, sizeof scrubbed));
    } else {
      w.str_n(cfg.argv + off, n);
    }
    off += static_cast<int>(n) + 1;
  }
  w.end_array();
  if (cfg.argv_truncated) w.field_bool("argv_truncated", true);
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

// Opens key's object with the signal's number, name, code and code name.
void begin_signal(JsonWriter& w, const char* key, int signo, int si_code, const SignalInfo* si,
                  const SignalCodeInfo* code) {
  w.key(key);
  w.begin_object();
  w.field_num("number", signo);
  w.field_str("name", si ? si->name : "UNKNOWN");
  w.field_num("code", si_code);
  w.field_str("code_name", code ? code->name : "UNKNOWN");
}

// The signal as delivered when a handler raised it again over the fault the
// section describes.
void write_reraised(JsonWriter& w, const Capture::Reraised& r) {
  begin_signal(w, "reraised", r.signo, r.info.si_code, find_signal(r.signo),
               find_signal_code(r.signo, r.info.si_code));
  w.field_num("sender_pid", r.info.si_pid);
  w.field_num("sender_uid", r.info.si_uid);
  if (r.frame >= 0) w.field_num("trampoline_frame", r.frame);  // none: the handler had returned
  w.field_str("original_from", r.from_context ? "context" : "siginfo");
  w.end_object();
}

void write_signal(JsonWriter& w, const Capture& c) {
  const SignalInfo* si = find_signal(c.signo);
  const SignalCodeInfo* code = find_signal_code(c.signo, c.info.si_code);
  begin_signal(w, "signal", c.signo, c.info.si_code, si, code);
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
  if (c.reraised.present) write_reraised(w, c.reraised);
  w.end_object();
}

// An uncaught C++ exception: its type and what().
void write_exception(JsonWriter& w, const Capture& c) {
  w.key("exception");
  w.begin_object();
  const TerminateInfo* t = c.terminate;
  if (t && t->has_exception) {
    w.field_str("type", t->type);
    if (t->message[0] || t->message_truncated) {
      w.str_exact("message", t->message, str_len(t->message));
      if (t->message_truncated) w.field_bool("message_truncated", true);
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

// An uncaught Python exception: what the package handed over.
void write_py_exception(JsonWriter& w, const Capture& c) {
  const PythonExceptionInfo* e = c.py_exception;
  w.key("exception");
  w.begin_object();
  w.field_str("language", "python");
  w.str_exact("type", e->type, str_len(e->type));
  w.str_exact("message", e->message, str_len(e->message));
  if (e->message_truncated) w.field_bool("message_truncated", true);
  w.key("traceback");
  w.begin_array();
  ExceptionFrame f;
  for (const char* p = e->frames; next_exception_frame(&p, &f);) {
    w.begin_object();
    w.str_exact("file", f.file, str_len(f.file));
    w.field_num("line", f.line);
    w.str_exact("function", f.function, str_len(f.function));
    w.field_str("origin", classify_python(f.file, f.function).id);
    w.end_object();
  }
  w.end_array();
  if (e->frames_truncated) w.field_bool("traceback_truncated", true);
  w.str_exact("text", e->text, str_len(e->text));
  if (e->text_truncated) w.field_bool("text_truncated", true);
  w.end_object();
}

void write_python(JsonWriter& w, const Capture& c) {
  w.key("python");
  if (c.python.present) {
    w.begin_object();
    w.field_str("version", c.python.version);
    w.field_str("implementation", "cpython");
    w.field_hex("runtime", c.python.runtime);
    w.field_str("runtime_found", c.python.found_at_install ? "install" : "crash");
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
  const int nsecondary = c.nsecondary ? *c.nsecondary : 0;
  for (int i = 0; c.secondary && i < nsecondary && i < kMaxSecondary; ++i) {
    const SecondaryCrash& s = c.secondary[i];
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
  write_breadcrumbs(w, c.breadcrumbs, c.nbreadcrumbs);
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
  if (c.suppressed_count) {
    // Crashes of this signature counted, not written, since `since`.
    char since[32];
    format_iso8601(since, c.suppressed_since, 0);
    w.key("suppressed");
    w.begin_object();
    w.key("count");
    w.unum(c.suppressed_count);
    w.field_str("since", since);
    w.end_object();
  }
  w.field_str("safe_read", safe_read_method_name());
  w.field_str("modules_from", !c.modules_from_snapshot ? "link map"
                              : c.modules_tail_walked  ? "snapshot+link map"
                                                       : "snapshot");
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

char g_dump_by_signal_because[256];

bool write_json_report(const Capture& c, const Config& cfg, int fd, int* err) {
  FdSink sink(fd, g_out_buf, sizeof g_out_buf);
  JsonWriter w(&sink);
  w.begin_object();
  w.field_str("schema", "faultline/1");
  w.field_str("kind", capture_kind_name(c.kind));
  // A dump written here was asked by signal (`faultline dump` by ptrace
  // writes "ptrace"): other threads may have seen EINTR.
  if (c.kind == CaptureKind::kDump) {
    w.field_str("capture", "signal");
    if (g_dump_by_signal_because[0]) w.field_str("capture_fallback", g_dump_by_signal_because);
  }
  char ts[32];
  format_iso8601(ts, c.time_sec, c.time_nsec);
  w.field_str("timestamp", ts);
  write_signal(w, c);
  if (c.kind == CaptureKind::kTerminate) write_exception(w, c);
  if (c.kind == CaptureKind::kException && c.py_exception) write_py_exception(w, c);
  w.key("diagnosis");
  w.begin_object();
  w.field_str("summary", c.summary);
  w.field_str("category", c.category);
  w.field_str("signature", c.signature);
  w.end_object();

  write_job(w);  // under torchrun only
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
