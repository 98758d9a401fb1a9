// The TORCHELASTIC_ERROR_FILE writer (see torchelastic.h for the format).
//
// Async-signal-safe: the text is built in static buffers with StrBuf, the
// JSON goes out through JsonWriter, files are made with open/renameat.
#include "core/write/torchelastic.h"

#include <fcntl.h>
#include <stdio.h>  // renameat
#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/signals.h"
#include "core/base/str.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/diagnosis.h"
#include "core/write/json_writer.h"

namespace faultline::core {
namespace {

// The error file, absolute, and its temporary sibling (set at install).
// 4 KiB: PATH_MAX.
char g_error_file[4096];
char g_error_tmp[4096 + 32];
bool g_enabled;

// How much of the stack the error file repeats: torchrun prints it in its
// summary, where a screenful is useful and the whole report is not (the
// report file has everything).
constexpr int kMaxPythonFrames = 32;
constexpr int kMaxNativeFrames = 24;

// The traceback text (py_callstack) and the writer's output buffer. Static,
// not on the signal stack; only the thread that owns the crash writes.
// 16 KiB holds kMaxPythonFrames + kMaxNativeFrames lines of ~250 bytes.
char g_callstack[16384];
char g_out[4096];

// faulthandler-like text: what torchrun shows under "traceback :".
size_t build_callstack(const Capture& c, const char* report_dir, const char* report_name) {
  StrBuf b(g_callstack, sizeof g_callstack);
  const SignalInfo* si = find_signal(c.signo);
  b.add("faultline: ").add(c.summary[0] ? c.summary : (si ? si->name : "fatal signal"));
  b.add("\n");
  if (c.category) b.add("category: ").add(c.category);
  if (c.signature[0]) b.add("  signature: ").add(c.signature);
  b.add("\n");
  const ThreadCapture* t = crashed_thread(c);
  const PyThread* py = t ? python_thread_for(c, t->tid) : nullptr;
  if (py && py->nframes > 0) {
    b.add("\nPython stack of thread ").add_dec(t->tid).add(" (most recent call first):\n");
    for (int i = 0; i < py->nframes && i < kMaxPythonFrames; ++i) {
      const PyFrame& f = py->frames[i];
      b.add("  File \"").add(f.file ? f.file : "???").add("\", line ").add_dec(f.line);
      b.add(", in ").add(f.function ? f.function : "???");
      b.add("  [").add(classify_python(f.file, f.function).id).add("]\n");
    }
    if (py->frames_total > kMaxPythonFrames) b.add("  ...\n");
  }
  if (t && t->nframes > 0) {
    b.add("\nNative stack of thread ").add_dec(t->tid).add(" (most recent call first):\n");
    for (int i = 0; i < t->nframes && i < kMaxNativeFrames; ++i) {
      const NativeFrame& f = t->frames[i];
      const char* module =
          f.module >= 0 && f.module < c.modules.count ? c.modules.items[f.module].path : nullptr;
      b.add("  #").add_dec(i).add(" ");
      if (module) {
        b.add(path_basename(module));
        if (f.symbol) {
          b.add("!").add(f.symbol).add("+").add_hex(f.symbol_offset);
        } else {
          b.add("+").add_hex(f.pc - c.modules.items[f.module].bias);
        }
      } else {
        b.add("?!").add_hex(f.pc);
      }
      b.add("  [").add(classify_native(module, f.symbol).id).add("]\n");
    }
    if (t->frames_total > kMaxNativeFrames) b.add("  ...\n");
  }
  if (report_dir && report_name) {
    b.add("\nfaultline report: ").add(report_dir).add("/").add(report_name).add("\n");
  }
  return b.len();
}

}  // namespace

void torchelastic_set_error_file(const char* path) {
  if (g_enabled) g_enabled = false;  // unset: no write (a page fault at start)
  if (!path || !*path) return;
  StrBuf b(g_error_file, sizeof g_error_file);
  if (path[0] != '/') {
    char cwd[4096];
    long n = syscall(SYS_getcwd, cwd, sizeof cwd);
    if (n <= 0) return;
    b.add(cwd).add("/");
  }
  b.add(path);
  if (b.truncated()) return;
  StrBuf t(g_error_tmp, sizeof g_error_tmp);
  t.add(g_error_file).add(".faultline-tmp");
  g_enabled = !t.truncated();
}

bool torchelastic_enabled() {
  return g_enabled;
}

bool write_torchelastic_error_file(const Capture& c, const char* report_dir,
                                   const char* report_name) {
  if (!g_enabled) return false;
  size_t n = build_callstack(c, report_dir, report_name);
  int fd = open(g_error_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  FdSink sink(fd, g_out, sizeof g_out);
  JsonWriter w(&sink);
  char ts[24];
  size_t tn = fmt_sdec(ts, c.time_sec);
  w.begin_object();
  w.key("message");
  w.begin_object();
  w.field_str("message", c.summary);
  w.key("extraInfo");
  w.begin_object();
  w.key("py_callstack");
  w.str_n(g_callstack, n);
  w.key("timestamp");
  w.str_n(ts, tn);
  w.end_object();
  w.end_object();
  w.end_object();
  sink.put('\n');
  bool ok = sink.flush() && !sink.failed();
  close(fd);
  if (!ok || renameat(AT_FDCWD, g_error_tmp, AT_FDCWD, g_error_file) != 0) {
    unlinkat(AT_FDCWD, g_error_tmp, 0);
    return false;
  }
  return true;
}

}  // namespace faultline::core
