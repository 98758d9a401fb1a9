// faultline job DIR [--json]: the reports of torchrun jobs under DIR put
// together per job (report/job.h). Exit 0 when every file was a report and
// some belonged to a job; 1 when files were skipped or no job was found.
// With --dump RUN_ID the job's local processes are dumped into DIR first
// (job_dump.h); 1 too when one of them could not be.
#include "cli/cmd_job.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "cli/job_dump.h"
#include "cli/report_input.h"
#include "report/job.h"
#include "report/render.h"
#include "report/report_dir.h"

namespace faultline::cli {

namespace {

struct JobArgs {
  std::string dir;
  bool json = false;
  bool no_recursive = false;
  unsigned jobs = 0;
  std::string dump;  // --dump RUN_ID
  double timeout = 10;
};

// --dump: the job's local processes dumped into args.dir. False when none
// was found or the directory cannot be made; `partial` when some failed.
bool dump_first(const JobArgs& args, bool* partial) {
  auto* e = &report::escape_controls;
  std::error_code ec;
  std::filesystem::create_directories(args.dir, ec);
  if (ec || !std::filesystem::is_directory(args.dir)) {
    fmt::print(stderr, "faultline: cannot make directory {}: {}\n", e(args.dir),
               ec ? ec.message() : "not a directory");
    return false;
  }
  std::vector<std::pair<int, std::string>> unreadable;
  std::vector<int> pids = job_processes(args.dump, &unreadable);
  if (!unreadable.empty()) {
    std::string list;
    for (const auto& [pid, why] : unreadable) list += fmt::format(" {}", pid);
    fmt::print(stderr,
               "faultline: the environment of {} {} could not be read ({}; another "
               "user's, or ptrace access restricted), so whether they belong to job {} cannot "
               "be told; run as the job's user or as root:{}\n",
               unreadable.size(), unreadable.size() == 1 ? "process" : "processes",
               unreadable.front().second, e(args.dump), list);
  }
  if (pids.empty()) {
    fmt::print(stderr, "faultline: no process of job {} (TORCHELASTIC_RUN_ID) on this host\n",
               e(args.dump));
    return false;
  }
  JobDump d = dump_job(pids, args.dir, args.timeout);
  for (const auto& [pid, why] : d.failed) {
    fmt::print(stderr, "faultline: process {}: {}\n", pid, e(why));
  }
  fmt::print(stderr, "faultline: dumped {} of {} processes of job {} into {}\n", d.dumped.size(),
             pids.size(), e(args.dump), e(args.dir));
  *partial = !d.failed.empty();
  return true;
}

void run_job(const JobArgs& args, int& status) {
  auto* e = &report::escape_controls;
  bool partial = false;
  if (!args.dump.empty() && !dump_first(args, &partial)) {
    status = kExitFailed;
    return;
  }
  std::vector<report::SkippedFile> skipped;
  std::vector<report::JobRank> ranks;
  size_t nfiles = 0;
  try {
    std::vector<std::string> files =
        report::list_report_files(args.dir, !args.no_recursive, &skipped);
    nfiles = files.size();
    std::vector<report::JobRank> slots(files.size());
    std::vector<bool> used = report::load_reports(
        files, args.jobs,
        [&](size_t i, const report::Report& r) { slots[i] = report::job_rank_of(r); }, &skipped);
    for (size_t i = 0; i < files.size(); ++i) {
      if (used[i]) ranks.push_back(std::move(slots[i]));
    }
  } catch (const std::exception& ex) {
    fmt::print(stderr, "faultline: {}\n", e(ex.what()));
    status = kExitFailed;
    return;
  }
  std::vector<report::JobResult> jobs = report::analyze_jobs(ranks);
  std::string out;
  if (args.json) {
    nlohmann::json j = report::jobs_to_json(jobs);
    nlohmann::json sk = nlohmann::json::array();
    for (const report::SkippedFile& s : skipped) {
      sk.push_back({{"path", s.path}, {"reason", s.reason}, {"message", s.message}});
    }
    j["skipped"] = sk;
    out = j.dump(2) + "\n";
  } else {
    out = report::jobs_to_text(jobs);
    if (!skipped.empty()) {
      out += "Skipped (not valid reports):\n";
      for (const report::SkippedFile& s : skipped) out += fmt::format("  {}\n", e(s.message));
    }
  }
  if (!print_out(out)) {
    status = kExitFailed;
    return;
  }
  if (nfiles == 0) {
    fmt::print(stderr, "faultline: {}: no reports (faultline-*.json) found\n", e(args.dir));
  } else if (jobs.empty() && !ranks.empty()) {
    fmt::print(stderr,
               "faultline: {}: none of the {} reports belongs to a job (no \"job\" field: "
               "not run under torchrun?)\n",
               e(args.dir), ranks.size());
  }
  status = !jobs.empty() && skipped.empty() && !partial ? kExitOk : kExitFailed;
}

}  // namespace

void add_job_command(CLI::App& app, int& status) {
  auto args = std::make_shared<JobArgs>();
  CLI::App* t = app.add_subcommand(
      "job",
      "Put the reports of distributed (torchrun) jobs under DIR together: the rank that failed "
      "first, where the others were, which left no report (exit 1 when files were skipped or "
      "no job was found)");
  t->add_option("DIR", args->dir,
                "directory of reports (subdirectories included); with --dump, where the "
                "dumps go (made if missing)")
      ->required();
  t->add_option("--dump", args->dump,
                "first take a live dump of every process of this job on this host (its "
                "TORCHELASTIC_RUN_ID), at once, into DIR");
  t->add_option("-t,--timeout", args->timeout, "with --dump: seconds to wait for each report")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  t->add_flag("--json", args->json, "print the jobs as JSON");
  t->add_flag("--no-recursive", args->no_recursive, "do not read subdirectories");
  t->add_option("-j,--jobs", args->jobs, "reader threads (default: one per CPU)");
  t->callback([args, &status] { run_job(*args, status); });
}

}  // namespace faultline::cli
