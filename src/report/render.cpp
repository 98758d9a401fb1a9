#include "report/render.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "report/inductor_kernel_line.h"
#include "report/torch_hints.h"

namespace faultline::report {

using nlohmann::json;

namespace {

const char* kUnknown = "unknown";

std::string or_unknown(const std::string& s) {
  return s.empty() ? kUnknown : s;
}

template <typename T>
std::string or_unknown(const std::optional<T>& v) {
  return v ? std::to_string(*v) : kUnknown;
}

// ANSI styling that is a no-op when colors are off.
struct Style {
  bool on;
  std::string paint(const char* code, const std::string& text) const {
    return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : text;
  }
  std::string bold(const std::string& t) const { return paint("1", t); }
  std::string red(const std::string& t) const { return paint("1;31", t); }
  std::string dim(const std::string& t) const { return paint("2", t); }
  std::string green(const std::string& t) const { return paint("32", t); }
  std::string yellow(const std::string& t) const { return paint("33", t); }
  std::string cyan(const std::string& t) const { return paint("36", t); }
};

std::string signal_line(const Report& r) {
  if (r.signal.name.empty() && !r.signal.number) return "unknown signal";
  std::string out =
      r.signal.name.empty() ? fmt::format("signal {}", *r.signal.number) : r.signal.name;
  if (!r.signal.description.empty()) {
    out += " (" + r.signal.description + ")";
  } else if (!r.signal.code_name.empty()) {
    out += " (" + r.signal.code_name + ")";
  }
  return out;
}

std::string thread_title(const Thread& t) {
  std::string out = "Thread " + or_unknown(t.tid);
  if (!t.name.empty()) out += " \"" + t.name + "\"";
  return out;
}

// "N more frames not captured" when the writer cut the stack.
size_t frames_cut(const Thread& t) {
  if (t.frames_total && *t.frames_total > static_cast<int64_t>(t.frames.size())) {
    return static_cast<size_t>(*t.frames_total) - t.frames.size();
  }
  return 0;
}

std::string inlined_lines(const Frame& f, const std::string& indent) {
  // Written by `faultline symbolize`: frames inlined into this one, innermost first.
  std::string out;
  if (!f.raw || !f.raw->is_object()) return out;
  auto it = f.raw->find("inlined");
  if (it == f.raw->end() || !it->is_array()) return out;
  for (const json& in : *it) {
    if (!in.is_object()) continue;
    std::string fn = string_field(in, "function");
    std::string file = string_field(in, "file");
    std::string line = in.contains("line") && in["line"].is_number_integer()
                           ? ":" + std::to_string(in["line"].get<int64_t>())
                           : "";
    out +=
        fmt::format("{}(inlined) {}{}\n", indent, escape_controls(fn.empty() ? "??" : demangle(fn)),
                    escape_controls(file.empty() ? "" : " (" + file + line + ")"));
  }
  return out;
}

// CPython's _Py_DumpASCII: printable ASCII as is, anything else escaped as
// \xNN, \uNNNN or \UNNNNNNNN (lower-case hex), cut at 500 characters with "...".
std::string faulthandler_ascii(const std::string& utf8) {
  const size_t kMaxStringLength = 500;
  std::string out;
  size_t chars = 0;
  for (size_t i = 0; i < utf8.size(); ++chars) {
    if (chars == kMaxStringLength) return out + "...";
    unsigned char c = static_cast<unsigned char>(utf8[i]);
    uint32_t cp = c;
    size_t n = 1;
    if (c >= 0xF0 && i + 3 < utf8.size()) {
      cp = ((c & 0x07u) << 18) | ((utf8[i + 1] & 0x3Fu) << 12) | ((utf8[i + 2] & 0x3Fu) << 6) |
           (utf8[i + 3] & 0x3Fu);
      n = 4;
    } else if (c >= 0xE0 && i + 2 < utf8.size()) {
      cp = ((c & 0x0Fu) << 12) | ((utf8[i + 1] & 0x3Fu) << 6) | (utf8[i + 2] & 0x3Fu);
      n = 3;
    } else if (c >= 0xC0 && i + 1 < utf8.size()) {
      cp = ((c & 0x1Fu) << 6) | (utf8[i + 1] & 0x3Fu);
      n = 2;
    }
    i += n;
    if (cp >= ' ' && cp <= 126) {
      out += static_cast<char>(cp);
    } else if (cp <= 0xff) {
      out += fmt::format("\\x{:02x}", cp);
    } else if (cp <= 0xffff) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      out += fmt::format("\\U{:08x}", cp);
    }
  }
  return out;
}

// The interpreter's minor version ("3.13.1" -> 13), 0 if unknown.
int python_minor(const Report& r) {
  if (!r.python || r.python->version.rfind("3.", 0) != 0) return 0;
  return std::atoi(r.python->version.c_str() + 2);
}

// The names faulthandler prints after "Fatal Python error: " (its own table of
// handled signals in Modules/faulthandler.c); other signals use strsignal's.
std::string faulthandler_signal_name(const Report& r) {
  static const struct {
    const char* name;
    const char* text;
  } kFaulthandlerNames[] = {
      {"SIGBUS", "Bus error"},
      {"SIGILL", "Illegal instruction"},
      {"SIGFPE", "Floating point exception"},  // "Floating-point exception" from 3.13
      {"SIGABRT", "Aborted"},
      {"SIGSEGV", "Segmentation fault"},
  };
  for (const auto& n : kFaulthandlerNames) {
    if (r.signal.name != n.name) continue;
    if (r.signal.name == "SIGFPE" && python_minor(r) >= 13) return "Floating-point exception";
    return n.text;
  }
  if (r.signal.number) {
    const char* s = strsignal(static_cast<int>(*r.signal.number));
    if (s) return s;
  }
  return r.signal.name.empty() ? "Unknown signal" : r.signal.name;
}

// Thread identifier as faulthandler prints it: the pthread id when the report
// has one, else the kernel tid.
uint64_t faulthandler_thread_id(const Thread& t) {
  for (const char* key : {"pthread_id", "thread_id"}) {
    if (!t.raw || !t.raw->is_object()) break;
    auto it = t.raw->find(key);
    if (it == t.raw->end()) continue;
    if (it->is_number_unsigned() || it->is_number_integer()) return it->get<uint64_t>();
    if (it->is_string()) {
      const std::string& s = it->get_ref<const std::string&>();
      char* end = nullptr;
      unsigned long long v = std::strtoull(s.c_str(), &end, 0);
      if (end && *end == '\0' && !s.empty()) return v;
    }
  }
  return t.tid ? static_cast<uint64_t>(*t.tid) : 0;
}

}  // namespace

std::string escape_controls(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  for (size_t i = 0; i < text.size();) {
    unsigned char c = byte(i);
    if (c < 0x20 || c == 0x7f) {
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          out += fmt::format("\\x{:02x}", c);
      }
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: decoded to judge the code point, copied when harmless.
    size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    uint32_t cp = n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
    bool valid = n != 0 && i + n <= text.size();
    for (size_t k = 1; valid && k < n; ++k) {
      valid = (byte(i + k) & 0xC0) == 0x80;
      cp = (cp << 6) | (byte(i + k) & 0x3Fu);
    }
    if (!valid) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
      continue;
    }
    bool control = (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
                   (cp >= 0x2066 && cp <= 0x2069);
    if (control) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      out.append(text, i, n);
    }
    i += n;
  }
  return out;
}

// The name the program was started by where it is not the file that ran (a
// link, or one binary shipped under several names): " (started as NAME)".
static std::string started_as(const Process& p) {
  if (p.exec_name.empty() || p.exec_name == p.executable) return "";
  return " (started as " + escape_controls(p.exec_name) + ")";
}

// argv as a shell would need it typed: arguments with spaces or quotes in
// single quotes, so that the line can be pasted back into a terminal.
std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    if (escape_controls(a) != a) {
      // Bash's $'...' quoting: the escapes both show the characters and type them back.
      std::string quoted;
      for (char c : a) quoted += c == '\'' || c == '\\' ? std::string("\\") + c : std::string(1, c);
      out += "$'" + escape_controls(quoted) + "'";
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string demangle(const std::string& symbol) {
  if (symbol.rfind("_Z", 0) != 0) return symbol;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : symbol;
}

std::string frame_text(const Frame& f) {
  if (f.is_python()) {
    const std::string& fn = !f.qualname.empty() ? f.qualname : f.function;
    return fmt::format("File \"{}\", line {}, in {}", f.file.empty() ? "???" : f.file,
                       f.line ? std::to_string(*f.line) : "???", fn.empty() ? "???" : fn);
  }
  Frame shown = f;
  std::string out;
  if (!f.function.empty()) {
    // After `faultline symbolize`: the function from DWARF (already
    // demangled, and named even where the symbol tables had nothing).
    out = (f.module.empty() ? std::string("???") : basename(f.module)) + "!" + f.function;
  } else {
    shown.symbol = demangle(f.symbol);
    out = native_location(shown);
  }
  if (!f.file.empty()) {
    out += " (" + f.file + (f.line ? ":" + std::to_string(*f.line) : "") + ")";
  }
  return out;
}

std::string render_text(const Report& r, const TextOptions& options) {
  Style st{options.color};
  std::string out;
  // Every value comes from the report: escaped before any styling of ours.
  auto field = [&](const char* label, const std::string& value, bool bold = false) {
    std::string v = escape_controls(value);
    out += fmt::format("{} {}\n", st.bold(fmt::format("{:<15}", std::string(label) + ":")),
                       bold ? st.bold(v) : v);
  };

  if (r.kind == "exception") {
    out +=
        st.red(fmt::format("Uncaught Python exception in process {}", or_unknown(r.process.pid))) +
        "\n";
  } else if (r.kind == "dump") {
    // Taken by ptrace from outside: no signal was sent, unless the caller
    // sent one to have the library's helper take it.
    bool ptrace = string_field(r.raw, "capture") == "ptrace";
    std::string how = !ptrace ? escape_controls(or_unknown(r.signal.name))
                      : options.signal_sent.empty()
                          ? std::string("by ptrace, no signal sent")
                          : fmt::format("by ptrace, asked by {} to its dump handler",
                                        escape_controls(options.signal_sent));
    out += st.yellow(fmt::format("Live dump of process {} ({}): the process continued",
                                 or_unknown(r.process.pid), how)) +
           "\n";
  } else {
    out += st.red(escape_controls(signal_line(r))) + "\n";
  }
  if (!r.signal.fault_address.empty()) field("Fault address", r.signal.fault_address);
  if (r.signal.sender_pid) field("Sent by pid", std::to_string(*r.signal.sender_pid));
  if (!r.signal.reraised_name.empty()) {
    field("Re-raised", "by a handler, as " + r.signal.reraised_name);
  }
  field("Diagnosis", or_unknown(r.diagnosis.summary), true);
  std::string kernel = crashed_inductor_kernel(r);
  if (!kernel.empty()) field("Kernel", kernel);
  field("Category", or_unknown(r.diagnosis.category));
  field("Signature", or_unknown(r.diagnosis.signature));
  std::string process = or_unknown(r.process.pid);
  if (!r.process.hostname.empty()) process += " on " + r.process.hostname;
  if (!r.process.argv.empty()) process += ": " + shell_join(r.process.argv);
  if (r.process.argv_truncated) process += " ... (command line cut at 8 KiB)";
  field("Process", process);
  field("Executable", or_unknown(r.process.executable) + started_as(r.process));
  if (!r.process.cwd.empty()) field("Directory", r.process.cwd);
  if (r.python) {
    field("Python", fmt::format("{} {}", or_unknown(r.python->implementation),
                                or_unknown(r.python->version)));
  } else if (r.raw.contains("python") && r.raw["python"].is_null()) {
    field("Python", "none");
  } else {
    field("Python", kUnknown);
  }
  field("Time", or_unknown(r.timestamp));
  field("Report",
        fmt::format("{}, faultline {}{}", or_unknown(r.kind), or_unknown(r.faultline_version),
                    r.path.empty() ? "" : ", " + r.path));
  // The minidump written beside the report (same directory), for lldb and
  // the minidump tools.
  std::string minidump = string_field(r.raw, "minidump");
  if (!minidump.empty() && minidump.find('/') == std::string::npos) {
    std::string dir = r.path.empty() ? "" : std::filesystem::path(r.path).parent_path().string();
    field("Minidump", escape_controls(dir.empty() ? minidump : dir + "/" + minidump));
  }

  // An uncaught Python exception: its text as Python printed it.
  auto exc = r.raw.find("exception");
  if (r.kind == "exception" && exc != r.raw.end() && exc->is_object()) {
    std::string text = string_field(*exc, "text");
    if (!text.empty()) {
      out += "\n" + st.bold("Exception:") + "\n";
      size_t start = 0;
      while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        out += "  " + escape_controls(text.substr(start, end - start)) + "\n";
        start = end + 1;
      }
    }
  }
  auto threads = r.threads_crashed_first();
  if (threads.empty()) out += "\nNo threads in this report.\n";
  for (const Thread* t : threads) {
    std::string title = escape_controls(thread_title(*t));
    out += "\n" + (t->crashed ? st.red(title + " (crashed)") : st.bold(title)) + ":\n";
    if (t->frames.empty()) out += "  (no frames captured)\n";
    for (size_t i = 0; i < t->frames.size(); ++i) {
      const Frame& f = t->frames[i];
      std::string origin = fmt::format("{:<9}", escape_controls(f.origin.empty() ? "?" : f.origin));
      std::string text = escape_controls(frame_text(f));
      out += fmt::format("  {:>3}  {} {}\n", "#" + std::to_string(i), st.dim(origin),
                         f.is_python() ? st.green(text) : text);
      out += inlined_lines(f, "                 ");
      for (const Frame& tc : f.tail_calls) {
        out += fmt::format("                 (tail call) {}\n", escape_controls(frame_text(tc)));
        out += inlined_lines(tc, "                   ");
      }
    }
    if (size_t cut = frames_cut(*t)) {
      out += fmt::format("  ... {} more frames not captured\n", cut);
    } else if (t->frames_truncated) {
      out += "  ... more frames not captured\n";
    }
  }
  if (!r.errors.empty()) {
    out += "\n" + st.yellow("Capture errors (this report is partial):") + "\n";
    for (const std::string& e : r.errors) out += "  - " + escape_controls(e) + "\n";
  }
  return out;
}

std::string render_faulthandler(const Report& r) {
  // Modules/faulthandler.c and Python/traceback.c (3.12): at most 100 threads,
  // 100 frames each, threads newest first (CPython's thread list order; the
  // main thread, the oldest, last), a blank line between threads.
  const size_t kMaxThreads = 100;
  const size_t kMaxFrames = 100;
  std::string out;
  if (r.kind != "dump" && r.kind != "exception") {
    out += "Fatal Python error: " + faulthandler_ascii(faulthandler_signal_name(r)) + "\n\n";
  }

  // The interpreter's order where the report has it (python_thread), else
  // the newest (highest tid) first.
  auto place = [](const Thread* t) -> int64_t {
    if (t->raw && t->raw->is_object()) {
      auto it = t->raw->find("python_thread");
      if (it != t->raw->end() && it->is_number_integer()) return it->get<int64_t>();
    }
    return -1;
  };
  const Thread* crashed = r.crashed_thread();
  std::vector<const Thread*> threads;
  for (size_t i = 0; i < r.threads.size(); ++i) {
    const Thread& t = r.threads[i];
    bool has_python =
        std::any_of(t.frames.begin(), t.frames.end(), [](const Frame& f) { return f.is_python(); });
    if (has_python || &t == crashed || place(&t) >= 0) threads.push_back(&t);
  }
  std::stable_sort(threads.begin(), threads.end(), [&](const Thread* a, const Thread* b) {
    int64_t pa = place(a), pb = place(b);
    if (pa >= 0 && pb >= 0) return pa < pb;
    return a->tid.value_or(0) > b->tid.value_or(0);
  });
  size_t shown = 0;
  for (const Thread* t : threads) {
    if (shown == kMaxThreads) {
      out += "...\n";
      break;
    }
    if (shown++) out += "\n";
    uint64_t id = faulthandler_thread_id(*t);
    // 3.14 names the thread (its kernel name, as its bytes are).
    std::string name = python_minor(r) >= 14 && !t->name.empty() ? " [" + t->name + "]" : "";
    out += fmt::format("{} 0x{:016x}{} (most recent call first):\n",
                       t == crashed && r.kind != "dump" ? "Current thread" : "Thread", id, name);
    size_t depth = 0;
    for (const Frame& f : t->frames) {
      if (!f.is_python()) continue;
      if (depth++ == kMaxFrames) {
        out += "  ...\n";
        break;
      }
      out += fmt::format("  File \"{}\", line {} in {}\n",
                         f.file.empty() ? "???" : faulthandler_ascii(f.file),
                         f.line && *f.line >= 0 ? std::to_string(*f.line) : "???",
                         f.function.empty() ? "???" : faulthandler_ascii(f.function));
    }
    if (depth == 0) out += "  <no Python frame>\n";
  }
  return out;
}

std::string render_explain(const Report& r) {
  std::string out;
  // Every piece of the report is escaped: explain prints to a terminal.
  auto* e = &escape_controls;
  out += fmt::format("{}\n", e(or_unknown(r.diagnosis.summary)));
  out += fmt::format("\ncategory:  {}\nsignature: {}\nsignal:    {}\n",
                     e(or_unknown(r.diagnosis.category)), e(or_unknown(r.diagnosis.signature)),
                     e(signal_line(r)));
  if (!r.signal.fault_address.empty()) out += "address:   " + e(r.signal.fault_address) + "\n";
  const Thread* t = r.crashed_thread();
  if (t && !t->frames.empty()) out += "top frame: " + e(frame_text(t->frames.front())) + "\n";
  std::string kernel = crashed_inductor_kernel(r);
  if (!kernel.empty()) out += "kernel:    " + e(kernel) + "\n";
  // Hints: the known-crash table (torch_hints.cpp), then any strings the
  // writer put in diagnosis.hints. Each table hint says what matched.
  std::vector<Hint> matched = match_hints(r.raw);
  const json& d = r.raw.contains("diagnosis") ? r.raw["diagnosis"] : json();
  std::vector<std::string> extra;
  if (d.is_object() && d.contains("hints") && d["hints"].is_array()) {
    for (const json& h : d["hints"]) {
      if (h.is_string()) {
        extra.push_back(h.get<std::string>());
      } else if (h.is_object() && h.contains("text") && h["text"].is_string()) {
        extra.push_back(h["text"].get<std::string>());
      }
    }
  }
  if (matched.empty() && extra.empty()) {
    out += "\nNo known pattern matches this crash.\n";
  }
  for (const Hint& h : matched) {
    out += fmt::format("\nHint [{}]: {}\n", e(h.id), e(h.title));
    out += "  Matched:\n";
    for (const std::string& ev : h.evidence) out += "    - " + e(ev) + "\n";
    out += "  Try:\n";
    for (const std::string& a : h.advice) out += "    - " + e(a) + "\n";
  }
  if (!extra.empty()) {
    out += "\nHints:\n";
    for (const std::string& h : extra) out += "  - " + e(h) + "\n";
  }
  return out;
}

}  // namespace faultline::report
