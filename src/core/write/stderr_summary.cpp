#include "core/write/stderr_summary.h"

#include "core/base/raw_log.h"
#include "core/base/signals.h"
#include "core/base/str.h"
#include "core/crash_state.h"
#include "core/diagnosis/diagnosis.h"
#include "core/handler_state.h"
#include "core/modules/modules.h"

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

namespace {

constexpr int kMaxStringLength = 500;  // faulthandler's limits
constexpr int kMaxFrameDepth = 100;
constexpr int kMaxThreads = 100;

// The process annotation the Python package sets (faultline.TEXT_MODE_KEY):
// "on" while faulthandler's own fatal handler writes the Python text.
const char* text_mode(const Capture& c) {
  for (int i = 0; i < c.nannotations; ++i) {
    if (c.annotations[i].key && str_eq(c.annotations[i].key, "faultline.faulthandler")) {
      return c.annotations[i].value;
    }
  }
  return nullptr;
}

// Text written in pieces of a small buffer (faulthandler's longest line,
// two strings of 500 escaped characters, would not fit a signal stack).
class Out {
 public:
  ~Out() { flush(); }
  Out& add(const char* s) { return add_n(s, str_len(s)); }
  Out& add_n(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (len_ == sizeof buf_) flush();
      buf_[len_++] = s[i];
    }
    return *this;
  }
  Out& add_char(char ch) { return add_n(&ch, 1); }
  Out& add_dec(uint64_t v) {
    char tmp[24];
    return add_n(tmp, fmt_dec(tmp, v));
  }
  Out& add_hex(uint64_t v, int digits) {
    static const char kHex[] = "0123456789abcdef";
    char tmp[16];
    for (int i = digits - 1; i >= 0; --i, v >>= 4) tmp[i] = kHex[v & 15];
    return add_n(tmp, static_cast<size_t>(digits));
  }
  void flush() {
    raw_write_n(raw_log_fd(), buf_, len_);
    len_ = 0;
  }

 private:
  char buf_[256];
  size_t len_ = 0;
};

// One UTF-8 character of s[0..n): its code point and length (1 for a byte
// that starts no valid sequence: it is shown as \xNN, as a surrogate escape
// would be).
uint32_t utf8_at(const char* s, size_t n, size_t* len) {
  auto u = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c0 = u(0);
  int more = c0 >= 0xf0 && c0 < 0xf8 ? 3 : c0 >= 0xe0 ? 2 : c0 >= 0xc2 && c0 < 0xe0 ? 1 : 0;
  if (more == 0 || static_cast<size_t>(more) >= n) {
    *len = 1;
    return c0;
  }
  uint32_t cp = c0 & (0x3fu >> more);
  for (int i = 1; i <= more; ++i) {
    if ((u(i) & 0xc0) != 0x80) {
      *len = 1;
      return c0;
    }
    cp = cp << 6 | (u(i) & 0x3f);
  }
  *len = static_cast<size_t>(more) + 1;
  return cp;
}

// A string as faulthandler writes it: printable ASCII as is, any other
// character as \xNN, \uNNNN or \UNNNNNNNN, at most 500 characters, then
// "..." when cut.
void add_ascii(Out* o, const char* s) {
  if (!s) {
    o->add("???");
    return;
  }
  size_t n = str_len(s);
  int chars = 0;
  for (size_t i = 0; i < n;) {
    if (chars == kMaxStringLength) {
      o->add("...");
      return;
    }
    size_t len = 1;
    uint32_t cp = utf8_at(s + i, n - i, &len);
    i += len;
    ++chars;
    if (cp >= 0x20 && cp <= 0x7e) {
      o->add_char(static_cast<char>(cp));
    } else if (cp <= 0xff) {
      o->add("\\x").add_hex(cp, 2);
    } else if (cp <= 0xffff) {
      o->add("\\u").add_hex(cp, 4);
    } else {
      o->add("\\U").add_hex(cp, 8);
    }
  }
}

// The interpreter's minor version ("3.13.1" -> 13), 0 if unknown.
int python_minor(const Capture& c) {
  if (c.python.hexversion) return static_cast<int>(c.python.hexversion >> 16 & 0xff);
  const char* v = c.python.version;
  if (v[0] != '3' || v[1] != '.') return 0;
  int minor = 0;
  for (int i = 2; v[i] >= '0' && v[i] <= '9'; ++i) minor = minor * 10 + (v[i] - '0');
  return minor;
}

// faulthandler's name of a fatal signal in the running interpreter's
// version (3.13 says "Floating-point exception", earlier ones "Floating
// point exception").
const char* fatal_error_name(const Capture& c, const char* fallback) {
  switch (c.signo) {
    case SIGSEGV:
      return "Segmentation fault";
    case SIGFPE:
      return python_minor(c) >= 13 ? "Floating-point exception" : "Floating point exception";
    case SIGABRT:
      return "Aborted";
    case SIGBUS:
      return "Bus error";
    case SIGILL:
      return "Illegal instruction";
    default:
      return fallback;
  }
}

enum class ThreadHeader { kCurrent, kOther, kStack };

void write_python_thread(const Capture& c, const PyThread& py, ThreadHeader header) {
  Out o;
  if (header == ThreadHeader::kStack) {
    o.add("Stack (most recent call first):\n");
  } else {
    o.add(header == ThreadHeader::kCurrent ? "Current thread 0x" : "Thread 0x");
    o.add_hex(py.thread_id, 16);
  }
  if (header != ThreadHeader::kStack && python_minor(c) >= 14) {
    // 3.14 names the thread (its kernel name) when it has one.
    for (int i = 0; i < c.nthreads; ++i) {
      if (c.threads[i].tid == py.native_tid && c.threads[i].name[0]) {
        o.add(" [").add(c.threads[i].name).add("]");
        break;
      }
    }
  }
  if (header != ThreadHeader::kStack) o.add(" (most recent call first):\n");
  if (py.nframes == 0) {
    o.add("  <no Python frame>\n");
    return;
  }
  for (int i = 0; i < py.nframes; ++i) {
    if (i == kMaxFrameDepth) {
      o.add("  ...\n");
      return;
    }
    const PyFrame& f = py.frames[i];
    o.add("  File ");
    if (f.file) {
      o.add("\"");
      add_ascii(&o, f.file);
      o.add("\"");
    } else {
      o.add("???");
    }
    o.add(", line ");
    if (f.line >= 0) {
      o.add_dec(static_cast<uint64_t>(f.line));
    } else {
      o.add("???");
    }
    o.add(" in ");
    add_ascii(&o, f.function);
    o.add("\n");
  }
  if (py.frames_total > py.nframes && py.nframes < kMaxFrameDepth) o.add("  ...\n");
}

// faulthandler's text of a crash: the fatal error line, then every Python
// thread in the interpreter's order, the crashing one as "Current thread".
void write_faulthandler_text(const Capture& c, const Config& cfg, const ThreadCapture* crashed,
                             const char* desc) {
  raw_log("Fatal Python error: ", fatal_error_name(c, desc), "\n\n");
  if (cfg.max_threads == 1) {
    // enable(all_threads=False): the crashing thread alone, as "Stack".
    for (int k = 0; crashed && k < c.python.nthreads; ++k) {
      if (c.python.threads[k].native_tid == crashed->tid) {
        write_python_thread(c, c.python.threads[k], ThreadHeader::kStack);
        return;
      }
    }
    raw_log("Stack (most recent call first):\n  <no Python frame>\n");
    return;
  }
  for (int k = 0; k < c.python.nthreads; ++k) {
    if (k) raw_log("\n");
    if (k == kMaxThreads) {
      raw_log("...\n");
      break;
    }
    const PyThread& py = c.python.threads[k];
    write_python_thread(
        c, py,
        crashed && py.native_tid == crashed->tid ? ThreadHeader::kCurrent : ThreadHeader::kOther);
  }
}

// faultline's additions, after faulthandler's text: the crashing thread's
// native frames in the layout of 3.14's C stack, then what went wrong.
void write_native_stack(const Capture& c, const ThreadCapture* t) {
  raw_log("\nCurrent thread's C stack trace (most recent call first):\n");
  int shown = 0;
  for (int i = 0; i < t->nframes && shown < 48; ++i, ++shown) {
    const NativeFrame& f = t->frames[i];
    char line[1200];
    StrBuf b(line, sizeof line);
    if (f.module >= 0) {
      b.add("  Binary file \"").add(c.modules.items[f.module].path).add("\"");
    } else {
      b.add("  Binary file \"???\"");
    }
    if (f.symbol) b.add(", at ").add(f.symbol).add("+").add_hex(f.symbol_offset);
    b.add(" [").add_hex(f.pc).add("]");
    write_escaped_line(line, b.len());
  }
  if (t->frames_total > shown) {
    raw_log("  <");
    raw_write_dec(raw_log_fd(), t->frames_total - shown);
    raw_log(" more frames in the report>\n");
  }
}

}  // namespace

bool report_announcement_off(const Capture& c) {
  const char* mode = text_mode(c);
  if (!mode) return false;
  return c.kind == CaptureKind::kDump || str_eq(mode, "text");
}

namespace {

// The program's handler that ran first and gave up lies in the module that
// defines _PyRuntime: CPython's faulthandler, which wrote the Python text.
bool fatal_handler_in_python(const Capture& c) {
  uintptr_t pc = g_handler.fatal_handler_pc;
  if (!pc || !c.python.present || !c.python.runtime) return false;
  int handler = find_module(c.modules, pc);
  return handler >= 0 && handler == find_module(c.modules, c.python.runtime);
}

}  // namespace

void write_stderr_summary(const Capture& c, const Config& cfg) {
  const SignalInfo* si = find_signal(c.signo);
  const char* desc = si ? si->description : "Fatal signal";
  const ThreadCapture* t = crashed_thread(c);
  if (c.kind == CaptureKind::kShutdown) {
    // Not a crash: the job is being stopped (torchrun's SIGTERM to the ranks
    // that survived). One line, and no fatal-error text that a log scraper
    // would count as a crash of this rank.
    raw_log("faultline: ");
    write_escaped_line(c.summary, str_nlen(c.summary, sizeof c.summary));
    return;
  }
  const char* mode = text_mode(c);
  // faulthandler wrote the Python text: the package says so, or a handler
  // that ran before faultline's (faulthandler.enable() after the preload)
  // raised the fault again after writing its own: not twice.
  // Or faulthandler, kept behind faultline, ran first and gave up.
  bool theirs = (mode && str_eq(mode, "on")) || c.reraised.present ||
                g_handler.python_text_written || fatal_handler_in_python(c);
  if (c.python.present && !theirs) {
    write_faulthandler_text(c, cfg, t, desc);
  } else if (!c.python.present) {
    raw_log("faultline: fatal signal: ", desc, "\n");
  }
  if (mode && str_eq(mode, "text")) return;  // enable(extras=False): the text alone
  if (t) write_native_stack(c, t);
  raw_log("\nfaultline: ");
  write_escaped_line(c.summary, str_nlen(c.summary, sizeof c.summary));
  if (c.reraised.present) {
    // As `faultline show` says it: the fault above, which a handler (the
    // program's, or faulthandler's) raised again as this signal.
    const SignalInfo* rs = find_signal(c.reraised.signo);
    raw_log("faultline: (re-raised by a handler as ", rs ? rs->name : "another signal",
            "; the original fault is shown)\n");
  }
}

}  // namespace faultline::core
