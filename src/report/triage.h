// Crash signatures and grouping of many reports (offline).
//
//   TriageResult t = triage_directory("/var/crashes");
//   for (const TriageGroup& g : t.groups) fmt::print("{} x{}\n", g.signature, g.count);
//
// Reports group by diagnosis.signature, the writer's fingerprint. A report
// without one gets the same signature computed here, by the crash path's own
// algorithm (core/diagnosis/signature.h; doc/report-format.md, "Crash signature"), so
// one bug lands in one group whichever side computed it.
#pragma once

#include <string>
#include <vector>

#include "report/report.h"
#include "report/report_dir.h"

namespace faultline::report {

// 16 lower-case hex digits computed from the signal, the category and the
// top frames of the crashed thread, as the crash path computes them.
std::string compute_signature(const Report& r);
// diagnosis.signature when the report has one, else compute_signature().
std::string report_signature(const Report& r);

// A group counts incidents: one per report, except that the reports of one
// distributed job (report/job.h: same job.run_id and restart) are one
// incident, represented by the job's first own failure.
struct TriageGroup {
  std::string signature;
  size_t count = 0;            // incidents
  size_t jobs = 0;             // of which distributed jobs
  std::string first_seen;      // earliest timestamp (ISO 8601)
  std::string last_seen;       // latest timestamp
  std::string representative;  // path of the earliest report
  std::string summary;         // its diagnosis
  std::string category;
  std::vector<std::string> hosts;  // distinct host names, sorted
  size_t pids = 0;                 // distinct (host, pid) pairs
  int64_t suppressed = 0;          // crashes counted, not reported (faultline.suppressed)
  std::vector<std::string> paths;  // every report of the group, by incident, earliest first
};

struct TriageResult {
  std::vector<TriageGroup> groups;  // largest first, then by first seen
  std::vector<SkippedFile> skipped;
  size_t reports = 0;  // reports grouped
};

struct TriageOptions {
  bool recursive = true;  // walk subdirectories (one per host, rank or run)
  unsigned jobs = 0;      // reader threads; 0: one per CPU
};

// Reads every *.json file under `dir` (hidden files and in-progress ".tmp-"
// files are not reports yet and are passed over). Throws ReportError(kIo)
// when `dir` itself cannot be read.
TriageResult triage_directory(const std::string& dir, const TriageOptions& options = {});
// Groups already loaded reports (paths taken from Report::path).
TriageResult triage_reports(const std::vector<Report>& reports);

}  // namespace faultline::report
