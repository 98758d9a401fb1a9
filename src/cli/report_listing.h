// The reports in a report directory, listed before and after a job runs
// (`run`) or a dump is asked for (`dump`), to find the ones it wrote.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace faultline::cli {

// Report files (final names only) in a directory, each with what identifies
// its current content: a report rewritten under the same name (two reports
// of one thread within a second share a name) counts as new.
using ReportListing = std::map<std::string, std::pair<ino_t, int64_t>>;

ReportListing list_reports(const std::string& dir);

// Names in `now` that are not in `before`, or whose file changed since.
std::vector<std::string> new_reports(const ReportListing& before, const ReportListing& now);

// `dir` made absolute and normal, without a trailing slash ("" is ".").
std::string absolute_dir(const std::string& dir);

}  // namespace faultline::cli
