// One answer per distributed job (offline): the reports of a torchrun job's
// ranks, put together by `job.run_id` and restart, say which rank failed
// first (the root cause), where every other rank was when it was stopped,
// and which ranks left no report. `faultline job` prints it; `faultline
// triage` counts a job as one incident (doc/torch.md).
//
//   std::vector<JobRank> ranks = ...;  // job_rank_of(report) for each report
//   for (const JobResult& j : analyze_jobs(ranks)) ...
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/report.h"

namespace faultline::report {

// Where a rank was waiting: the innermost frame of the user's own Python
// code and the torch.distributed call it made from there.
struct WaitingIn {
  std::string call;  // "all_reduce"; "" when no torch.distributed call is on the stack
  std::string file;  // the user's file
  int64_t line = 0;
  std::string function;      // the user's function ("sync_grads")
  std::string text() const;  // "all_reduce at train.py:41 under sync_grads"
};

// What `faultline job` needs of one report (a few hundred bytes: thousands
// are kept, never the reports themselves).
struct JobRank {
  std::string run_id;  // "" when the report has no job
  int64_t restart = 0;
  std::optional<int64_t> rank, world_size;
  std::string host;
  std::string path;
  std::string kind;       // "crash", "shutdown", "exception", "dump", "terminate"
  std::string signal;     // "SIGSEGV"
  std::string timestamp;  // ISO 8601 UTC
  std::string summary, category, signature;
  bool fatal = false;      // a failure of its own (not a stop from outside)
  bool peer_loss = false;  // a failure that says a peer went away first
  std::optional<WaitingIn> waiting_in;
};

// The job facts of a report, whether it failed of its own accord, and where
// it was waiting.
JobRank job_rank_of(const Report& r);

// True for a report that is a failure of its own rather than a stop from
// outside: a fault, an abort, an uncaught exception; not a SIGTERM, SIGINT
// or SIGHUP another process sent, nor a live dump.
bool is_own_failure(const JobRank& r);

struct JobRankResult {
  int64_t rank = -1;
  std::string role;                 // "root-cause" | "collateral" | "missing"
  const JobRank* report = nullptr;  // nullptr for a missing rank
};

struct JobResult {
  std::string run_id;
  int64_t restart = 0;
  std::optional<int64_t> world_size;
  const JobRank* root_cause = nullptr;  // nullptr: no rank failed of its own
  // Why the root cause may not be the first failure (other own failures
  // that the evidence cannot order before or after it); "" when it is clear.
  std::string ambiguity;
  std::vector<JobRankResult> ranks;   // by rank
  std::vector<const JobRank*> extra;  // reports without a rank number, or a rank's second report
};

// Groups by (run_id, restart) and decides the roles. Reports without a job
// are left out. Results point into `ranks`, which must outlive them.
std::vector<JobResult> analyze_jobs(const std::vector<JobRank>& ranks);

// Sentry tags of the report's job ("job.run_id", "job.rank", ...), so that
// a fleet's events group and filter by job and rank; nothing without a job.
void add_job_tags(const Report& r, nlohmann::json& tags);

// {"jobs": [{"run_id", "restart_count", "world_size", "root_cause", "ranks"}]}
nlohmann::json jobs_to_json(const std::vector<JobResult>& jobs);
// The text form: the root cause as "rank R", then each rank's role.
std::string jobs_to_text(const std::vector<JobResult>& jobs);

}  // namespace faultline::report
