#include "report/triage.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "core/diagnosis/signature.h"
#include "report/job.h"

namespace faultline::report {

namespace fs = std::filesystem;

namespace {

// The report's strings as the crash path's C strings: nullptr for "".
const char* or_null(const std::string& s) {
  return s.empty() ? nullptr : s.c_str();
}

}  // namespace

std::string compute_signature(const Report& r) {
  char out[core::kSignatureBytes];
  if (r.kind == "dump") {
    core::dump_signature(out);
    return out;
  }
  // The writer hashes "?" for a signal it has no name for (the report says "UNKNOWN").
  std::string signal = r.signal.name.empty() || r.signal.name == "UNKNOWN" ? "?" : r.signal.name;
  std::string exception_type;
  auto exc = r.raw.is_object() ? r.raw.find("exception") : r.raw.end();
  if (r.kind == "terminate" && exc != r.raw.end() && exc->is_object()) {
    exception_type = string_field(*exc, "type");
  }
  bool sent_by_process = r.signal.code && *r.signal.code <= 0;  // SI_USER, SI_TKILL, ...
  core::SignatureBuilder s(signal.c_str(), r.diagnosis.category.c_str(),
                           r.kind == "terminate" ? exception_type.c_str() : nullptr,
                           sent_by_process);
  if (r.kind == "exception") {
    // An uncaught Python exception: signed by its type and its traceback's
    // innermost frames, as the crash path signs it (diagnosis.cpp).
    std::string type = exc != r.raw.end() && exc->is_object() ? string_field(*exc, "type") : "";
    core::SignatureBuilder p(signal.c_str(), r.diagnosis.category.c_str(), type.c_str(),
                             sent_by_process);
    const nlohmann::json* tb = exc != r.raw.end() && exc->is_object() && exc->contains("traceback")
                                   ? &exc->at("traceback")
                                   : nullptr;
    std::vector<std::array<std::string, 3>> frames;
    for (size_t i = tb && tb->is_array() ? tb->size() : 0; i > 0 && frames.size() < 4; --i) {
      const nlohmann::json& f = (*tb)[i - 1];
      if (!f.is_object()) continue;
      frames.push_back(
          {string_field(f, "file"), string_field(f, "function"), string_field(f, "origin")});
    }
    for (const auto& f : frames) p.python(f[0].c_str(), f[1].c_str(), f[2].c_str());
    p.finish(out);
    return out;
  }
  const Thread* t = r.crashed_thread();
  for (size_t i = 0; t && i < t->frames.size(); ++i) {
    const Frame& f = t->frames[i];
    if (f.is_python()) {
      s.python(or_null(f.file), f.function.c_str(), f.origin.c_str());
    } else {
      uint64_t offset = std::strtoull(f.module_offset.c_str(), nullptr, 16);
      s.native(or_null(f.module), or_null(f.symbol), offset, f.origin.c_str());
    }
  }
  s.finish(out);
  return out;
}

std::string report_signature(const Report& r) {
  return r.diagnosis.signature.empty() ? compute_signature(r) : r.diagnosis.signature;
}

namespace {

struct Entry {
  std::string signature;
  std::string timestamp;
  std::string path;
  std::string summary;
  std::string category;
  std::string host;
  int64_t pid = -1;
  // A job's reports are one incident (report/job.h): "<run_id>/<restart>",
  // or "" outside a job; the job's first own failure represents it.
  std::string job;
  bool own_failure = false, peer_loss = false;
  std::vector<std::string> members;  // the job's other reports
  int64_t suppressed = 0;
};

std::string mtime_iso8601(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  std::tm tm{};
  gmtime_r(&st.st_mtime, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Entry entry_of(const Report& r) {
  Entry e;
  e.signature = report_signature(r);
  e.timestamp = !r.timestamp.empty() ? r.timestamp : mtime_iso8601(r.path);
  e.path = r.path;
  e.summary = r.diagnosis.summary;
  e.category = r.diagnosis.category;
  e.host = r.process.hostname;
  e.pid = r.process.pid.value_or(-1);
  JobRank j = job_rank_of(r);
  if (!j.run_id.empty()) e.job = fmt::format("{}/{}", j.run_id, j.restart);
  e.own_failure = j.fatal;
  e.peer_loss = j.peer_loss;
  e.suppressed = r.suppressed;
  return e;
}

// Each job's reports become one entry: its first own failure (else its
// earliest report) with the others as members.
std::vector<Entry> incidents(std::vector<Entry> entries) {
  std::vector<Entry> out;
  std::map<std::string, std::vector<Entry>> jobs;
  for (Entry& e : entries) {
    if (e.job.empty()) {
      out.push_back(std::move(e));
    } else {
      jobs[e.job].push_back(std::move(e));
    }
  }
  auto key = [](const Entry& e) {
    return std::make_tuple(!e.own_failure, e.peer_loss, std::cref(e.timestamp), std::cref(e.path));
  };
  for (auto& [job, members] : jobs) {
    auto first = std::min_element(members.begin(), members.end(),
                                  [&](const Entry& a, const Entry& b) { return key(a) < key(b); });
    Entry rep = std::move(*first);
    members.erase(first);
    for (Entry& m : members) rep.members.push_back(std::move(m.path));
    out.push_back(std::move(rep));
  }
  return out;
}

TriageResult group(std::vector<Entry> all, std::vector<SkippedFile> skipped) {
  size_t nreports = all.size();
  std::vector<Entry> entries = incidents(std::move(all));
  // Earliest first, so that the first entry of a group is its representative.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.timestamp, a.path) < std::tie(b.timestamp, b.path);
  });
  std::map<std::string, TriageGroup> groups;
  std::map<std::string, std::set<std::string>> hosts;
  std::map<std::string, std::set<std::pair<std::string, int64_t>>> pids;
  for (const Entry& e : entries) {
    TriageGroup& g = groups[e.signature];
    if (g.count++ == 0) {
      g.signature = e.signature;
      g.first_seen = e.timestamp;
      g.representative = e.path;
      g.summary = e.summary;
      g.category = e.category;
    }
    g.last_seen = e.timestamp;
    // Saturating: counts come from the files, which may say anything.
    g.suppressed = e.suppressed > std::numeric_limits<int64_t>::max() - g.suppressed
                       ? std::numeric_limits<int64_t>::max()
                       : g.suppressed + e.suppressed;
    g.paths.push_back(e.path);
    g.paths.insert(g.paths.end(), e.members.begin(), e.members.end());
    if (!e.job.empty()) ++g.jobs;
    if (!e.host.empty()) hosts[e.signature].insert(e.host);
    pids[e.signature].insert({e.host, e.pid});
  }
  TriageResult out;
  out.reports = nreports;
  for (auto& [sig, g] : groups) {
    g.hosts.assign(hosts[sig].begin(), hosts[sig].end());
    g.pids = pids[sig].size();
    out.groups.push_back(std::move(g));
  }
  std::sort(out.groups.begin(), out.groups.end(), [](const TriageGroup& a, const TriageGroup& b) {
    if (a.count != b.count) return a.count > b.count;
    return std::tie(a.first_seen, a.signature) < std::tie(b.first_seen, b.signature);
  });
  std::sort(skipped.begin(), skipped.end(),
            [](const SkippedFile& a, const SkippedFile& b) { return a.path < b.path; });
  out.skipped = std::move(skipped);
  return out;
}

}  // namespace

TriageResult triage_reports(const std::vector<Report>& reports) {
  std::vector<Entry> entries;
  for (const Report& r : reports) entries.push_back(entry_of(r));
  return group(std::move(entries), {});
}

TriageResult triage_directory(const std::string& dir, const TriageOptions& options) {
  std::vector<SkippedFile> skipped;
  std::vector<std::string> files = list_report_files(dir, options.recursive, &skipped);
  std::vector<Entry> entries(files.size());
  std::vector<bool> used = load_reports(
      files, options.jobs, [&](size_t i, const Report& r) { entries[i] = entry_of(r); }, &skipped);
  std::vector<Entry> good;
  for (size_t i = 0; i < files.size(); ++i) {
    if (used[i]) good.push_back(std::move(entries[i]));
  }
  return group(std::move(good), std::move(skipped));
}

}  // namespace faultline::report
