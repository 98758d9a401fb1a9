// Rendering reports for people (offline): plain text and CPython
// faulthandler's layout (GitHub-flavoured Markdown: markdown.h).
//
//   Report r = load_report(path);
//   fmt::print("{}", render_text(r, TextOptions{/*color=*/true, ""}));
//
// Every renderer accepts partial reports: what is missing prints as "unknown".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/markdown.h"  // render_markdown, which callers of the renderers use too
#include "report/report.h"

namespace faultline::report {

struct TextOptions {
  bool color = false;  // ANSI colors (the caller decides: --color, NO_COLOR, isatty)
  // The signal `faultline dump` sent to ask for this dump, "" for none: a
  // dump the library's helper took by ptrace then says it was asked so.
  std::string signal_sent;
};

// `faultline show`: a header (signal, fault address, diagnosis, process), then
// every thread, crashed first, with interleaved frames and their origins.
std::string render_text(const Report& r, const TextOptions& options = {});

// `faultline show --faulthandler`: exactly what CPython's faulthandler prints
// (Python frames only), so tools that parse faulthandler output read it:
//   Fatal Python error: Segmentation fault
//
//   Current thread 0x00007f... (most recent call first):
//     File "x.py", line 3 in f
std::string render_faulthandler(const Report& r);

// `faultline explain`: the diagnosis in words, and any hints the report carries.
std::string render_explain(const Report& r);

// One frame as text: `File "x.py", line 12, in f` or `libc.so.6!memcpy+0x12 (file.c:3)`.
std::string frame_text(const Frame& f);
// argv joined as a shell would need it typed (single quotes where needed,
// $'...' with escapes for arguments holding control characters).
std::string shell_join(const std::vector<std::string>& argv);
// Text from a report made safe for a terminal or a log: control characters
// (C0 with newline and tab, DEL, C1 such as U+009B CSI), the bidirectional
// overrides and isolates (U+202A-U+202E, U+2066-U+2069) and bytes that are not
// UTF-8 are written as \xNN / \uNNNN escapes, so that nothing from a report
// can move the cursor, recolour, retitle the terminal or fake a line.
std::string escape_controls(const std::string& text);
// The symbol demangled for people ("" stays "").
std::string demangle(const std::string& symbol);

}  // namespace faultline::report
