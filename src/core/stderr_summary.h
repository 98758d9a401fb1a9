// The faulthandler-style summary on stderr: the fatal error line, the
// diagnosis and the crashed thread's frames (Python and native, in call
// order where the merge is proven). Written after the report file: stderr
// may be a dead or full pipe.
#pragma once

namespace faultline::core {

struct Capture;
struct Config;

void write_stderr_summary(const Capture& c, const Config& cfg);

}  // namespace faultline::core
