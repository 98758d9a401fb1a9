// faultline triage DIR: groups the reports under a directory by crash signature.
#include "cli/cmd_triage.h"

#include <fmt/format.h>

#include <memory>

#include "cli/report_input.h"
#include "report/render.h"
#include "report/triage.h"

namespace faultline::cli {

namespace {

struct TriageArgs {
  std::string dir;
  bool json = false;
  bool no_recursive = false;
  unsigned jobs = 0;
};

// Signatures, summaries and paths come from the reports and the directory
// (a file name may hold anything but '/' and NUL): all escaped for the terminal.
std::string text_output(const report::TriageResult& t) {
  auto* e = &report::escape_controls;
  std::string out = fmt::format("{} reports, {} groups", t.reports, t.groups.size());
  if (!t.skipped.empty()) out += fmt::format(", {} files skipped", t.skipped.size());
  out += "\n";
  for (const report::TriageGroup& g : t.groups) {
    out += fmt::format("\n{:>6}x  {}  {}\n", g.count, e(g.signature),
                       g.summary.empty() ? "(no diagnosis)" : e(g.summary));
    out += fmt::format("         category {}, {} processes on {} hosts\n",
                       g.category.empty() ? "unknown" : e(g.category), g.pids, g.hosts.size());
    if (g.jobs) {
      out += fmt::format("         {} distributed jobs, {} reports (faultline job DIR)\n", g.jobs,
                         g.paths.size());
    }
    out += fmt::format("         first {}  last {}\n",
                       g.first_seen.empty() ? "unknown" : e(g.first_seen),
                       g.last_seen.empty() ? "unknown" : e(g.last_seen));
    if (g.suppressed > 0) {
      out +=
          fmt::format("         {} more suppressed (FAULTLINE_SAME_CRASH_LIMIT)\n", g.suppressed);
    }
    out += fmt::format("         e.g. {}\n", e(g.representative));
  }
  if (!t.skipped.empty()) {
    out += "\nSkipped (not valid reports):\n";
    for (const report::SkippedFile& s : t.skipped) out += fmt::format("  {}\n", e(s.message));
  }
  return out;
}

nlohmann::json json_output(const report::TriageResult& t) {
  nlohmann::json groups = nlohmann::json::array();
  for (const report::TriageGroup& g : t.groups) {
    groups.push_back({{"signature", g.signature},
                      {"count", g.count},
                      {"jobs", g.jobs},
                      {"first_seen", g.first_seen},
                      {"last_seen", g.last_seen},
                      {"representative", g.representative},
                      {"summary", g.summary},
                      {"category", g.category},
                      {"hosts", g.hosts},
                      {"processes", g.pids},
                      {"suppressed", g.suppressed},
                      {"reports", g.paths}});
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const report::SkippedFile& s : t.skipped) {
    skipped.push_back({{"path", s.path}, {"reason", s.reason}, {"message", s.message}});
  }
  return {{"reports", t.reports}, {"groups", groups}, {"skipped", skipped}};
}

}  // namespace

void add_triage_command(CLI::App& app, int& status) {
  auto args = std::make_shared<TriageArgs>();
  CLI::App* t = app.add_subcommand(
      "triage",
      "Group the reports under DIR by crash signature (exit 1 when files had to be skipped)");
  t->add_option("DIR", args->dir, "directory of reports (subdirectories included)")->required();
  t->add_flag("--json", args->json, "print the groups as JSON");
  t->add_flag("--no-recursive", args->no_recursive, "do not read subdirectories");
  t->add_option("-j,--jobs", args->jobs, "reader threads (default: one per CPU)");
  t->callback([args, &status] {
    report::TriageResult result;
    try {
      result = report::triage_directory(args->dir, {!args->no_recursive, args->jobs});
    } catch (const std::exception& e) {
      fmt::print(stderr, "faultline: {}\n", report::escape_controls(e.what()));
      status = kExitFailed;
      return;
    }
    std::string out = args->json ? json_output(result).dump(2) + "\n" : text_output(result);
    if (!print_out(out)) {
      status = kExitFailed;
      return;
    }
    status = result.skipped.empty() ? kExitOk : kExitFailed;
  });
}

}  // namespace faultline::cli
