// faultline job --dump RUN_ID DIR: a live dump of every local process of a
// torchrun job (TORCHELASTIC_RUN_ID=RUN_ID in /proc/PID/environ), taken at
// once, the reports copied into DIR, which `faultline job` then reads.
//
//   JobDump d = dump_job(run_id, dir, timeout_s);   // then report on d
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace faultline::cli {

struct JobDump {
  std::vector<int> dumped;                              // processes whose report is in DIR
  std::vector<std::pair<int, std::string>> failed;      // pid, why (faultline dump's words)
  std::vector<std::pair<int, std::string>> unreadable;  // pid, why its environ was closed
};

// NAME=value pairs of /proc/PID/environ; nullopt with the errno in *error
// when it cannot be read.
std::optional<std::map<std::string, std::string>> environ_of(int pid, int* error);

// The report's "job" object for a process of a torchrun job (its
// TORCHELASTIC_* variables, as the library writes it in the process); null
// when it is not one or its environment cannot be read.
nlohmann::json job_of(int pid);

// The ranks of the job on this host: processes with TORCHELASTIC_RUN_ID=
// run_id and RANK set, less a rank's own children (data loader workers
// inherit both). Pids whose environment cannot be read go to `unreadable`.
std::vector<int> job_processes(const std::string& run_id,
                               std::vector<std::pair<int, std::string>>* unreadable);

// Dumps every one of `pids` at once (`faultline dump PID` each, in
// parallel) and copies each report into `dir` (made if missing; an existing
// file is never replaced).
JobDump dump_job(const std::vector<int>& pids, const std::string& dir, double timeout_s);

}  // namespace faultline::cli
