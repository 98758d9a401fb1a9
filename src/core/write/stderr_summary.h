// The faulthandler-style summary on stderr: the fatal error line, the
// diagnosis and the crashed thread's frames (Python and native, in call
// order where the merge is proven). Written after the report file: stderr
// may be a dead or full pipe.
#pragma once

#include <stddef.h>

namespace faultline::core {

struct Capture;
struct Config;

void write_stderr_summary(const Capture& c, const Config& cfg);

// Writes `s` as text for a terminal or a CI log: control characters (from
// argv, file and function names, report paths), C1 controls and bidi
// overrides become \xNN escapes, as faulthandler escapes what it prints.
// Ends the line unless newline is false.
void write_escaped_line(const char* s, size_t n, bool newline = true);

}  // namespace faultline::core
