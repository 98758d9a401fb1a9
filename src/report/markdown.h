// `faultline markdown`: a report as a GitHub issue body (offline).
#pragma once

#include <cstddef>
#include <string>

#include "report/report.h"

namespace faultline::report {

struct MarkdownOptions {
  size_t max_bytes = 60000;  // GitHub allows 65536 characters per issue body
};

// A GitHub issue body, never longer than max_bytes; what had to be cut is
// said at the end. Accepts partial reports, as the renderers of render.h do.
std::string render_markdown(const Report& r, const MarkdownOptions& options = {});

}  // namespace faultline::report
