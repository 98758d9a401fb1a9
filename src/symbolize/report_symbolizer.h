// Adds source positions to a faultline/1 report (what `faultline symbolize
// REPORT.json` does).
//
//   auto report = faultline::symbolize::parse_report(text);   // throws BadReport
//   faultline::symbolize::Symbolizer symbolizer(options);
//   ReportStats stats = faultline::symbolize::symbolize_report(report, symbolizer);
//
// Native frames gain `function` (demangled), `file`, `line`, `column` and
// `inlined` (the inlined calls at that pc, innermost first, each with its own
// function/file/line/column); `function`/`file`/`line` of the frame itself
// are those of the function that really exists in the binary, at the
// position of the outermost inlined call (or of the pc when nothing was
// inlined). Each module that frames point into gains `debug_source`.
// Frames of Inductor kernels gain `inductor_kernel` (inductor_kernel_origins.h).
// Running it again on its own output changes nothing.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "symbolize/symbolize.h"

namespace faultline::symbolize {

class BadReport : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ReportStats {
  int native_frames = 0;  // native frames seen
  int named = 0;          // ... that got a function name
  int with_lines = 0;     // ... that got file and line
};

// Parses `text` as a faultline/1 report; throws BadReport saying what is
// wrong (not JSON, where; not an object; another schema).
nlohmann::ordered_json parse_report(const std::string& text);

// Symbolizes every native frame in place. Throws BadReport only for a report
// whose structure is unusable (threads not an array); odd frames and modules
// are skipped.
ReportStats symbolize_report(nlohmann::ordered_json& report, Symbolizer& symbolizer);

// Parses "0x1a2b" (or decimal); false on anything else.
bool parse_address(const std::string& text, uint64_t* value);

}  // namespace faultline::symbolize
