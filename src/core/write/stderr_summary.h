// The text on stderr: faulthandler's, byte for byte for the crashed
// interpreter's version ("Fatal Python error: ...", every Python thread by
// its pthread id, the crashing one as "Current thread"), then faultline's
// additions: the crashing thread's native frames in the layout of 3.14's C
// stack and the diagnosis. When the Python package says faulthandler's own
// handler writes the Python text (the process annotation "faultline.faulthandler" is
// "on"), only the additions; when it is "text", only the text. Written after the report file:
// stderr may be a dead or full pipe.
#pragma once

#include <stddef.h>

namespace faultline::core {

struct Capture;
struct Config;

void write_stderr_summary(const Capture& c, const Config& cfg);

// True when the line naming the report stays off the text file: the Python
// package drives the text (the process annotation "faultline.faulthandler"
// is set) and this is a dump (its text is faulthandler's alone), or the
// package asked for the text alone ("text": enable(extras=False)).
bool report_announcement_off(const Capture& c);

// Writes `s` as text for a terminal or a CI log: control characters (from
// argv, file and function names, report paths), C1 controls and bidi
// overrides become \xNN escapes, as faulthandler escapes what it prints.
// Ends the line unless newline is false.
void write_escaped_line(const char* s, size_t n, bool newline = true);

}  // namespace faultline::core
