#include "report/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <map>
#include <tuple>

#include "report/render.h"
#include "report/triage.h"

namespace faultline::report {

using nlohmann::json;

namespace {

// Different hosts' clocks are not comparable closer than this: two own
// failures on different hosts within it cannot be ordered by their times.
constexpr int64_t kClockSkewMs = 2000;

// Words of failures that say another rank went away first: such a rank
// failed because of a peer, so it is a root cause only if nothing else is.
constexpr const char* kPeerLossWords[] = {
    "closed by peer",           "reset by peer",     "Broken pipe",  "Connection refused",
    "communicator was aborted", "NCCL communicator", "peer process",
};

std::optional<int64_t> int_field(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// Milliseconds since the epoch of an ISO 8601 UTC time; -1 when unreadable.
int64_t parse_ms(const std::string& ts) {
  std::tm tm{};
  int ms = 0;
  const char* end = strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return -1;
  if (*end == '.') ms = std::atoi(end + 1);
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

bool is_library_file(const std::string& file) {
  return file.empty() || file[0] == '<' || file.find("/site-packages/") != std::string::npos ||
         file.find("/dist-packages/") != std::string::npos ||
         file.find("/lib/python3") != std::string::npos ||
         file.find("/python/faultline/") != std::string::npos;
}

bool is_distributed_file(const std::string& file) {
  return file.find("/torch/distributed/") != std::string::npos;
}

// A Python frame as waiting_in_frames reads it.
struct PyPlace {
  std::string file;
  int64_t line = 0;
  std::string function;
};

// The user's innermost frame (py: innermost first) and the
// torch.distributed call under it, if there is a user frame.
std::optional<WaitingIn> waiting_in_frames(const std::vector<PyPlace>& py) {
  size_t user = 0;
  while (user < py.size() && is_library_file(py[user].file)) ++user;
  if (user == py.size()) return std::nullopt;
  WaitingIn w;
  w.file = py[user].file;
  w.line = py[user].line;
  w.function = py[user].function;
  // The call the user made: the outermost torch.distributed frame below the
  // user's, passing over wrappers and private helpers.
  for (size_t i = 0; i < user; ++i) {
    const PyPlace& f = py[i];
    if (!is_distributed_file(f.file)) continue;
    if (w.call.empty() || (f.function != "wrapper" && f.function[0] != '_')) {
      w.call = f.function;
    }
  }
  return w;
}

std::optional<WaitingIn> waiting_in_thread(const Thread& t) {
  std::vector<PyPlace> py;
  for (const Frame& f : t.frames) {
    if (f.is_python()) py.push_back({f.file, f.line.value_or(0), f.function});
  }
  return waiting_in_frames(py);
}

// Where an uncaught Python exception was raised: its traceback (innermost
// last in the report), read as a thread's stack.
std::optional<WaitingIn> waiting_in_exception(const Report& r) {
  auto exc = r.raw.find("exception");
  if (r.kind != "exception" || exc == r.raw.end() || !exc->is_object()) return std::nullopt;
  auto tb = exc->find("traceback");
  if (tb == exc->end() || !tb->is_array()) return std::nullopt;
  std::vector<PyPlace> py;
  for (auto it = tb->rbegin(); it != tb->rend(); ++it) {
    if (!it->is_object()) continue;
    py.push_back({string_field(*it, "file"), int_field(*it, "line").value_or(0),
                  string_field(*it, "function")});
  }
  return waiting_in_frames(py);
}

std::optional<WaitingIn> waiting_in_report(const Report& r) {
  if (std::optional<WaitingIn> w = waiting_in_exception(r)) return w;
  std::optional<WaitingIn> first;
  for (const Thread* t : r.threads_crashed_first()) {
    std::optional<WaitingIn> w = waiting_in_thread(*t);
    if (!w) continue;
    if (!w->call.empty()) return w;  // the thread in a collective
    if (!first) first = w;
  }
  return first;
}

bool mentions_peer_loss(const std::string& text) {
  for (const char* w : kPeerLossWords) {
    if (text.find(w) != std::string::npos) return true;
  }
  return false;
}

// The order of own failures: those not caused by a lost peer first, then by
// time, then by rank.
bool fails_before(const JobRank* a, const JobRank* b) {
  return std::make_tuple(a->peer_loss, parse_ms(a->timestamp), a->rank.value_or(-1), a->path) <
         std::make_tuple(b->peer_loss, parse_ms(b->timestamp), b->rank.value_or(-1), b->path);
}

// Why `root` may not be the first failure, or "".
std::string ambiguity_of(const JobRank* root, const std::vector<const JobRank*>& failures,
                         const std::vector<int64_t>& missing) {
  if (root->peer_loss) {
    std::string s = "every failure says a peer went away first";
    if (!missing.empty()) s += fmt::format("; rank {} left no report", missing.front());
    return s;
  }
  int64_t t0 = parse_ms(root->timestamp);
  for (const JobRank* f : failures) {
    if (f == root || f->peer_loss) continue;
    int64_t t = parse_ms(f->timestamp);
    std::string who = f->rank ? fmt::format("rank {}", *f->rank) : "a rank";
    if (t0 < 0 || t < 0) return fmt::format("{} also failed and a time is unreadable", who);
    if (f->host != root->host && t - t0 < kClockSkewMs) {
      return fmt::format(
          "{} also failed {} ms later on another host ({}): closer than clocks agree", who, t - t0,
          f->host.empty() ? "unknown" : f->host);
    }
    if (t == t0) return fmt::format("{} also failed in the same millisecond", who);
  }
  return "";
}

// Priority of a rank's reports when it left several: its own failure, then
// a shutdown report, then anything else; later before earlier among equals.
int report_rank(const JobRank& r) {
  if (is_own_failure(r)) return 0;
  return r.kind == "shutdown" ? 1 : 2;
}

JobResult analyze_job(std::vector<const JobRank*> reports) {
  JobResult j;
  j.run_id = reports.front()->run_id;
  j.restart = reports.front()->restart;
  std::map<int64_t, const JobRank*> by_rank;
  std::vector<const JobRank*> failures;
  for (const JobRank* r : reports) {
    if (r->world_size) j.world_size = std::max(j.world_size.value_or(0), *r->world_size);
    if (is_own_failure(*r)) failures.push_back(r);
    if (!r->rank) {
      j.extra.push_back(r);
      continue;
    }
    const JobRank*& slot = by_rank[*r->rank];
    if (!slot) {
      slot = r;
    } else if (std::make_tuple(report_rank(*r), parse_ms(slot->timestamp)) <
               std::make_tuple(report_rank(*slot), parse_ms(r->timestamp))) {
      j.extra.push_back(slot);
      slot = r;
    } else {
      j.extra.push_back(r);
    }
  }
  std::vector<int64_t> missing;
  for (int64_t i = 0; j.world_size && i < *j.world_size; ++i) {
    if (!by_rank.count(i)) missing.push_back(i);
  }
  if (!failures.empty()) {
    std::sort(failures.begin(), failures.end(), fails_before);
    j.root_cause = failures.front();
    j.ambiguity = ambiguity_of(j.root_cause, failures, missing);
  }
  for (int64_t m : missing) by_rank[m] = nullptr;
  for (const auto& [rank, r] : by_rank) {
    const char* role = !r ? "missing" : r == j.root_cause ? "root-cause" : "collateral";
    j.ranks.push_back({rank, role, r});
  }
  return j;
}

json waiting_json(const std::optional<WaitingIn>& w) {
  if (!w) return nullptr;
  return {{"call", w->call.empty() ? json(nullptr) : json(w->call)},
          {"file", w->file},
          {"line", w->line},
          {"function", w->function},
          {"text", w->text()}};
}

// Among collateral ranks waiting in a collective: the ranks whose call is not
// the one most of them are in (a rank that skipped a collective).
std::string odd_one_out(const JobResult& j) {
  std::map<std::string, int> calls;
  for (const JobRankResult& r : j.ranks) {
    if (r.report && r.report->waiting_in) ++calls[r.report->waiting_in->call];
  }
  if (calls.size() < 2) return "";
  auto most = std::max_element(calls.begin(), calls.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string out;
  for (const JobRankResult& r : j.ranks) {
    if (!r.report || !r.report->waiting_in || r.report->waiting_in->call == most->first) continue;
    out += fmt::format("{}rank {} is not in {} where {} others are (it is in {})",
                       out.empty() ? "" : "; ", r.rank, most->first.empty() ? "?" : most->first,
                       most->second, r.report->waiting_in->text());
  }
  return out;
}

}  // namespace

std::string WaitingIn::text() const {
  std::string where = fmt::format("{}:{} under {}", basename(file), line, function);
  return call.empty() ? where : fmt::format("{} at {}", call, where);
}

JobRank job_rank_of(const Report& r) {
  JobRank j;
  auto job = r.raw.find("job");
  if (job != r.raw.end() && job->is_object()) {
    j.run_id = string_field(*job, "run_id");
    j.restart = int_field(*job, "restart_count").value_or(0);
    j.rank = int_field(*job, "rank");
    j.world_size = int_field(*job, "world_size");
    j.host = string_field(*job, "host");
  }
  if (j.host.empty()) j.host = r.process.hostname;
  j.path = r.path;
  j.kind = r.kind;
  // An exception report's signal is the live dump's that took it: not the failure.
  j.signal = r.kind == "exception" ? "" : r.signal.name;
  j.timestamp = r.timestamp;
  j.summary = r.diagnosis.summary;
  j.category = r.diagnosis.category;
  j.signature = report_signature(r);
  j.fatal = is_own_failure(j);
  std::string message = r.diagnosis.summary;
  auto exc = r.raw.find("exception");
  if (exc != r.raw.end() && exc->is_object()) message += " " + string_field(*exc, "message");
  j.peer_loss = j.fatal && mentions_peer_loss(message);
  if (!j.fatal || j.kind == "exception") j.waiting_in = waiting_in_report(r);
  return j;
}

bool is_own_failure(const JobRank& r) {
  if (r.kind == "dump" || r.kind == "shutdown") return false;
  if (r.kind == "exception" || r.kind == "terminate") return true;
  // A crash report for a stop signal (FAULTLINE_SIGNALS may list them).
  return r.signal != "SIGTERM" && r.signal != "SIGINT" && r.signal != "SIGHUP" &&
         r.signal != "SIGKILL";
}

std::vector<JobResult> analyze_jobs(const std::vector<JobRank>& ranks) {
  std::map<std::pair<std::string, int64_t>, std::vector<const JobRank*>> jobs;
  for (const JobRank& r : ranks) {
    if (!r.run_id.empty()) jobs[{r.run_id, r.restart}].push_back(&r);
  }
  std::vector<JobResult> out;
  for (auto& [key, reports] : jobs) out.push_back(analyze_job(std::move(reports)));
  return out;
}

void add_job_tags(const Report& r, json& tags) {
  auto job = r.raw.find("job");
  if (job == r.raw.end() || !job->is_object() || string_field(*job, "run_id").empty()) return;
  for (const char* key :
       {"run_id", "rank", "local_rank", "world_size", "group_rank", "restart_count", "host"}) {
    auto v = job->find(key);
    if (v == job->end()) continue;
    // Sentry's tag values are strings of at most 200 characters.
    std::string text = v->is_string()           ? v->get<std::string>()
                       : v->is_number_integer() ? std::to_string(v->get<int64_t>())
                                                : "";
    if (!text.empty()) tags[fmt::format("job.{}", key)] = text.substr(0, 200);
  }
}

json jobs_to_json(const std::vector<JobResult>& jobs) {
  json out = json::array();
  for (const JobResult& j : jobs) {
    json root = nullptr;
    if (j.root_cause) {
      const JobRank& r = *j.root_cause;
      root = {{"rank", r.rank ? json(*r.rank) : json(nullptr)},
              {"kind", r.kind},
              {"signal", r.signal.empty() ? json(nullptr) : json(r.signal)},
              {"timestamp", r.timestamp},
              {"host", r.host},
              {"report", r.path},
              {"diagnosis",
               {{"summary", r.summary}, {"category", r.category}, {"signature", r.signature}}}};
    }
    json ranks = json::array();
    for (const JobRankResult& r : j.ranks) {
      json e = {{"rank", r.rank}, {"role", r.role}};
      e["report"] = r.report ? json(r.report->path) : json(nullptr);
      e["kind"] = r.report ? json(r.report->kind) : json(nullptr);
      e["signal"] = r.report && !r.report->signal.empty() ? json(r.report->signal) : json(nullptr);
      e["waiting_in"] = r.report ? waiting_json(r.report->waiting_in) : json(nullptr);
      ranks.push_back(e);
    }
    json extra = json::array();
    for (const JobRank* r : j.extra) extra.push_back(r->path);
    std::string odd = odd_one_out(j);
    out.push_back({{"run_id", j.run_id},
                   {"restart_count", j.restart},
                   {"world_size", j.world_size ? json(*j.world_size) : json(nullptr)},
                   {"root_cause", root},
                   {"ambiguity", j.ambiguity.empty() ? json(nullptr) : json(j.ambiguity)},
                   {"note", odd.empty() ? json(nullptr) : json(odd)},
                   {"ranks", ranks},
                   {"other_reports", extra}});
  }
  return {{"jobs", out}};
}

std::string jobs_to_text(const std::vector<JobResult>& jobs) {
  auto* e = &escape_controls;
  std::string out;
  for (const JobResult& j : jobs) {
    size_t missing = std::count_if(j.ranks.begin(), j.ranks.end(),
                                   [](const JobRankResult& r) { return !r.report; });
    out += fmt::format("job {} (restart {}): world size {}, {} ranks reported, {} missing\n",
                       e(j.run_id), j.restart,
                       j.world_size ? std::to_string(*j.world_size) : "unknown",
                       j.ranks.size() - missing, missing);
    if (j.root_cause) {
      const JobRank& r = *j.root_cause;
      out += fmt::format("  root cause: {} on {}: {}{} at {}\n",
                         r.rank ? fmt::format("rank {}", *r.rank) : "a rank without a number",
                         e(r.host.empty() ? "unknown host" : r.host), e(r.kind),
                         r.signal.empty() ? "" : " " + e(r.signal), e(r.timestamp));
      out += fmt::format("    {}\n", e(r.summary.empty() ? "(no diagnosis)" : r.summary));
      out += fmt::format("    report: {}\n", e(r.path));
      if (!j.ambiguity.empty()) out += fmt::format("    ambiguous: {}\n", e(j.ambiguity));
    } else {
      out +=
          "  root cause: none found: no rank failed of its own (every rank was stopped:\n"
          "    a hang, or a stop from outside)\n";
    }
    std::string odd = odd_one_out(j);
    if (!odd.empty()) out += fmt::format("  note: {}\n", e(odd));
    for (const JobRankResult& r : j.ranks) {
      out += fmt::format("  rank {:<5} {:<11}", r.rank, r.role);
      if (!r.report) {
        out += " no report\n";
        continue;
      }
      out += " " + e(r.report->kind);
      if (!r.report->signal.empty()) out += " " + e(r.report->signal);
      if (r.report->waiting_in) out += fmt::format("  in {}", e(r.report->waiting_in->text()));
      out += "\n";
    }
    for (const JobRank* r : j.extra) out += fmt::format("  also: {}\n", e(r->path));
    out += "\n";
  }
  return out;
}

}  // namespace faultline::report
