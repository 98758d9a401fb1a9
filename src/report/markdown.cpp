// `faultline markdown`: a GitHub issue body for a report.
#include "report/markdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "report/inductor_kernel_line.h"
#include "report/render.h"

namespace faultline::report {

using nlohmann::json;

namespace {

// 500 characters: long enough for any path or demangled name a person reads,
// short enough that one pathological template name cannot eat the 60 KB budget.
const size_t kMaxLine = 500;

std::string clip(const std::string& s, size_t max = kMaxLine) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  return s.substr(0, cut) + "...";
}

// Text for a table cell or a paragraph, one line: the characters that could
// start emphasis, code, links, raw HTML, entities or end a table cell escaped.
//
// Control characters (a lone \r ends a table row in some renderers, an
// escape sequence reaches whoever pastes the text into a terminal) are first
// written as visible escapes by escape_controls(), on every piece of report
// text: cells, headings, code spans and code blocks.
std::string one_line(const std::string& text) {
  return clip(escape_controls(text));
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : one_line(text)) {
    if (std::string("\\`*_[]<>|~&").find(c) != std::string::npos) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

// Inline code whose delimiter is longer than any backtick run inside.
std::string code(const std::string& text) {
  std::string t = one_line(text);
  size_t run = 0, longest = 0;
  for (char c : t) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  std::string fence(longest + 1, '`');
  std::string pad = (t.empty() || t.front() == '`' || t.back() == '`') ? " " : "";
  // A '|' inside a table cell ends the cell even in code spans (GFM).
  std::string escaped;
  for (char c : t) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return fence + pad + escaped + pad + fence;
}

std::string code_block(const std::string& body) {
  size_t run = 0, longest = 0;
  for (char c : body) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  std::string fence(std::max<size_t>(3, longest + 1), '`');
  return fence + "text\n" + body + fence + "\n";
}

// The first string found at one of these JSON pointers, or "".
std::string first_of(const json& raw, std::initializer_list<const char*> pointers) {
  for (const char* p : pointers) {
    try {
      json::json_pointer ptr(p);
      if (!raw.contains(ptr)) continue;
      const json& v = raw.at(ptr);
      if (v.is_string() && !v.get_ref<const std::string&>().empty()) return v.get<std::string>();
      if (v.is_number()) return v.dump();
    } catch (const json::exception&) {
      // A value of another type on the way (a newer writer's layout): not there.
    }
  }
  return "";
}

struct Limits {
  size_t crashed_frames = std::numeric_limits<size_t>::max();
  size_t other_frames = std::numeric_limits<size_t>::max();
  size_t other_threads = std::numeric_limits<size_t>::max();
  size_t errors = std::numeric_limits<size_t>::max();
};

struct Cut {
  size_t frames = 0;
  size_t threads = 0;
  size_t errors = 0;
};

std::string stack(const Thread& t, size_t max_frames, Cut& cut) {
  std::string body;
  size_t n = std::min(max_frames, t.frames.size());
  for (size_t i = 0; i < n; ++i) {
    const Frame& f = t.frames[i];
    body += one_line(fmt::format("#{:<3} {:<9} {}", i, f.origin.empty() ? "?" : f.origin,
                                 frame_text(f))) +
            "\n";
    for (const Frame& tc : f.tail_calls)
      body += one_line(fmt::format("     {:<9} (tail call) {}", "", frame_text(tc))) + "\n";
  }
  if (n < t.frames.size()) {
    body += fmt::format("... {} more frames cut from this issue\n", t.frames.size() - n);
    cut.frames += t.frames.size() - n;
  }
  if (t.frames_total && *t.frames_total > static_cast<int64_t>(t.frames.size())) {
    body += fmt::format("... {} more frames not captured\n",
                        *t.frames_total - static_cast<int64_t>(t.frames.size()));
  }
  if (t.frames.empty()) body += "(no frames captured)\n";
  return code_block(body);
}

std::string thread_heading(const Thread& t) {
  std::string out = "Thread " + (t.tid ? std::to_string(*t.tid) : std::string("unknown"));
  if (!t.name.empty()) out += " \"" + t.name + "\"";
  return out;
}

std::string render(const Report& r, const Limits& lim, Cut& cut) {
  cut = Cut{};
  std::string out;
  std::string summary = r.diagnosis.summary.empty()
                            ? (r.signal.name.empty() ? "Crash" : r.signal.name) +
                                  std::string(" (no diagnosis in the report)")
                            : r.diagnosis.summary;
  out += "**" + escape(summary) + "**\n\n";

  auto unknown = [](const std::string& s) { return s.empty() ? std::string("unknown") : s; };
  std::string signal = r.signal.name.empty() ? "unknown" : code(r.signal.name);
  if (!r.signal.description.empty()) signal += " " + escape(r.signal.description);
  if (!r.signal.fault_address.empty()) signal += " at " + code(r.signal.fault_address);
  if (!r.signal.reraised_name.empty()) {
    signal += " (re-raised by a handler as " + code(r.signal.reraised_name) + ")";
  }
  std::string python =
      r.python ? escape(unknown(r.python->implementation) + " " + unknown(r.python->version))
               : (r.raw.contains("python") && r.raw["python"].is_null() ? "none" : "unknown");
  std::string torch = first_of(
      r.raw, {"/python/torch_version", "/python/packages/torch", "/python/torch/version",
              "/annotations/torch.version", "/annotations/torch_version", "/annotations/torch"});
  // process.os is uname(2) as the crash path records it.
  std::string os = first_of(r.raw, {"/process/os/sysname", "/system/os", "/os/name"});
  std::string release = first_of(r.raw, {"/process/os/release", "/system/kernel", "/os/release"});
  std::string machine = first_of(r.raw, {"/process/os/machine", "/system/machine"});
  if (!release.empty()) os += (os.empty() ? "" : " ") + release;
  if (!machine.empty()) os += (os.empty() ? "" : " ") + std::string("(") + machine + ")";
  std::string cpu = first_of(r.raw, {"/system/cpu", "/system/cpu_model", "/cpu/model", "/cpu",
                                     "/host/cpu", "/annotations/cpu"});
  std::string command = shell_join(r.process.argv);

  out += "| Field | Value |\n|---|---|\n";
  auto row = [&](const char* k, const std::string& v) {
    out += fmt::format("| {} | {} |\n", k, v);
  };
  row("Kind", escape(unknown(r.kind)));
  row("Signal", signal);
  row("Category", escape(unknown(r.diagnosis.category)));
  std::string kernel = crashed_inductor_kernel(r);
  if (!kernel.empty()) row("Kernel", escape(kernel));
  row("Signature", r.diagnosis.signature.empty() ? "unknown" : code(r.diagnosis.signature));
  row("Python", python);
  row("PyTorch", escape(unknown(torch)));
  row("OS", escape(unknown(os)));
  row("CPU", escape(unknown(cpu)));
  row("Executable", r.process.executable.empty() ? "unknown" : code(r.process.executable));
  row("Command", (command.empty() ? std::string("unknown") : code(command)) +
                     (r.process.argv_truncated ? " (command line cut at 8 KiB)" : ""));
  row("Host", escape(unknown(r.process.hostname)));
  row("Time", escape(unknown(r.timestamp)));
  row("faultline", escape(unknown(r.faultline_version)));
  out += "\n";

  auto threads = r.threads_crashed_first();
  const Thread* crashed = r.crashed_thread();
  size_t others_begin = 0;
  if (crashed) {
    out += "### Crashing thread: " + escape(thread_heading(*crashed)) + "\n\n";
    out += stack(*crashed, lim.crashed_frames, cut) + "\n";
    others_begin = 1;
  }
  size_t others = threads.size() - others_begin;
  if (others > 0) {
    out += fmt::format("<details>\n<summary>{} ({})</summary>\n\n",
                       crashed ? "Other threads" : "Threads", others);
    size_t shown = std::min(others, lim.other_threads);
    for (size_t i = 0; i < shown; ++i) {
      const Thread& t = *threads[others_begin + i];
      out += "#### " + escape(thread_heading(t)) + "\n\n" + stack(t, lim.other_frames, cut) + "\n";
    }
    if (shown < others) {
      out += fmt::format("{} more threads cut from this issue.\n\n", others - shown);
      cut.threads += others - shown;
    }
    out += "</details>\n\n";
  }
  if (!r.errors.empty()) {
    out += fmt::format("<details>\n<summary>Capture errors ({})</summary>\n\n", r.errors.size());
    size_t shown = std::min(r.errors.size(), lim.errors);
    for (size_t i = 0; i < shown; ++i) out += "- " + escape(r.errors[i]) + "\n";
    if (shown < r.errors.size()) cut.errors = r.errors.size() - shown;
    out += "\n</details>\n\n";
  }
  return out;
}

}  // namespace

std::string render_markdown(const Report& r, const MarkdownOptions& options) {
  // Ever smaller renderings until one fits: fewer frames of other threads,
  // fewer other threads, then fewer frames of the crashed thread itself.
  const size_t kNone = 0;
  std::vector<Limits> steps;
  steps.push_back(Limits{});
  for (size_t other_frames : std::initializer_list<size_t>{50, 20, 8}) {
    Limits l;
    l.other_frames = other_frames;
    steps.push_back(l);
  }
  for (size_t other_threads : std::initializer_list<size_t>{64, 16, 4, kNone}) {
    Limits l;
    l.other_frames = 8;
    l.other_threads = other_threads;
    steps.push_back(l);
  }
  for (size_t crashed_frames : std::initializer_list<size_t>{200, 64, 16}) {
    Limits l;
    l.other_threads = kNone;
    l.crashed_frames = crashed_frames;
    l.errors = 20;
    steps.push_back(l);
  }
  std::string source = r.path.empty() ? "the report" : code(basename(r.path));
  std::string footer_full = "_Generated by `faultline markdown` from " + source + "._\n";
  std::string out;
  Cut cut;
  for (const Limits& lim : steps) {
    out = render(r, lim, cut);
    std::string footer = footer_full;
    if (cut.frames || cut.threads || cut.errors) {
      footer = fmt::format(
          "_Cut to stay under {} KB: {} frames, {} threads and {} capture errors left out; "
          "`faultline show` on {} prints everything._\n",
          options.max_bytes / 1000, cut.frames, cut.threads, cut.errors, source);
    }
    out += footer;
    if (out.size() <= options.max_bytes) return out;
  }
  // Still too big (a tiny max_bytes): cut at a line boundary, keeping valid UTF-8.
  std::string note = "\n_Cut to stay under the size limit._\n";
  size_t keep = options.max_bytes > note.size() ? options.max_bytes - note.size() : 0;
  out = clip(out, keep);
  auto nl = out.rfind('\n');
  out = (nl == std::string::npos ? std::string() : out.substr(0, nl + 1)) + note;
  return out.size() <= options.max_bytes ? out : std::string();
}

}  // namespace faultline::report
