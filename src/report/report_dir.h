// Reading a directory of reports (offline), shared by `faultline triage` and
// `faultline job`: which files are reports, and loading them on several
// threads, each report reduced by the caller to what it needs (thousands of
// whole reports would not fit in memory together).
//
//   std::vector<SkippedFile> skipped;
//   auto files = list_report_files(dir, true, &skipped);
//   std::vector<Entry> entries(files.size());
//   load_reports(files, 0, [&](size_t i, const Report& r) { entries[i] = entry_of(r); }, &skipped);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "report/report.h"

namespace faultline::report {

struct SkippedFile {
  std::string path;
  std::string reason;  // "unreadable", "empty", "truncated", ...
  std::string message;
};

// The report files under `dir`, sorted (hidden files and in-progress
// ".tmp-" files are not reports yet and are passed over). Directories that
// cannot be read are added to `skipped`. Throws ReportError(kIo) when `dir`
// itself cannot be read.
std::vector<std::string> list_report_files(const std::string& dir, bool recursive,
                                           std::vector<SkippedFile>* skipped);

// Loads each file on `jobs` threads (0: one per CPU) and calls `use(i, r)`
// for files[i] (concurrently: `use` writes only its own slot). Files that
// are not valid reports are appended to `skipped`, in file order; returns
// for each file whether it was used.
std::vector<bool> load_reports(const std::vector<std::string>& files, unsigned jobs,
                               const std::function<void(size_t, const Report&)>& use,
                               std::vector<SkippedFile>* skipped);

}  // namespace faultline::report
