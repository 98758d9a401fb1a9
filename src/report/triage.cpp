#include "report/triage.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
  if (r.kind == "terminate" && r.raw.is_object()) {
    auto e = r.raw.find("exception");
    if (e != r.raw.end() && e->is_object()) exception_type = string_field(*e, "type");
  }
  bool sent_by_process = r.signal.code && *r.signal.code <= 0;  // SI_USER, SI_TKILL, ...
  core::SignatureBuilder s(signal.c_str(), r.diagnosis.category.c_str(),
                           r.kind == "terminate" ? exception_type.c_str() : nullptr,
                           sent_by_process);
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
  e.suppressed = r.suppressed;
  return e;
}

TriageResult group(std::vector<Entry> entries, std::vector<SkippedFile> skipped) {
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
    if (!e.host.empty()) hosts[e.signature].insert(e.host);
    pids[e.signature].insert({e.host, e.pid});
  }
  TriageResult out;
  out.reports = entries.size();
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

bool looks_like_report_name(const fs::path& p) {
  std::string name = p.filename().string();
  return p.extension() == ".json" && !name.empty() && name[0] != '.' &&
         name.find(".tmp-") == std::string::npos;
}

}  // namespace

TriageResult triage_reports(const std::vector<Report>& reports) {
  std::vector<Entry> entries;
  for (const Report& r : reports) entries.push_back(entry_of(r));
  return group(std::move(entries), {});
}

TriageResult triage_directory(const std::string& dir, const TriageOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ReportError(ReportErrorKind::kIo, fmt::format("{}: not a directory", dir));
  }
  std::vector<std::string> files;
  std::vector<SkippedFile> skipped;
  auto consider = [&](const fs::directory_entry& de) {
    std::error_code e2;
    // Links are followed; a dangling one is listed as unreadable rather than
    // missed, and a FIFO, socket or device with a report's name is listed as
    // not a file (read_file() refuses it without blocking).
    if (!de.is_directory(e2) && looks_like_report_name(de.path())) {
      files.push_back(de.path().string());
    }
  };
  if (options.recursive) {
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
        end;
    if (ec) throw ReportError(ReportErrorKind::kIo, fmt::format("{}: {}", dir, ec.message()));
    for (; it != end; it.increment(ec)) {
      if (ec) {
        skipped.push_back({it->path().string(), to_string(ReportErrorKind::kIo), ec.message()});
        ec.clear();
        continue;
      }
      // A subdirectory we may not list: say so instead of silently missing its reports.
      if (it->is_directory(ec) && ::access(it->path().c_str(), R_OK | X_OK) != 0) {
        skipped.push_back({it->path().string(), to_string(ReportErrorKind::kIo),
                           fmt::format("{}: directory not readable", it->path().string())});
        it.disable_recursion_pending();
        continue;
      }
      consider(*it);
    }
  } else {
    fs::directory_iterator it(dir, ec), end;
    if (ec) throw ReportError(ReportErrorKind::kIo, fmt::format("{}: {}", dir, ec.message()));
    for (; it != end; it.increment(ec)) {
      if (ec) break;
      consider(*it);
    }
  }
  std::sort(files.begin(), files.end());

  // Reading and parsing dominate; files are independent, so split them
  // across threads, each filling its own slots.
  std::vector<Entry> entries(files.size());
  std::vector<std::optional<SkippedFile>> failures(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      try {
        entries[i] = entry_of(load_report(files[i]));
      } catch (const ReportError& e) {
        failures[i] = SkippedFile{files[i], to_string(e.kind()), e.what()};
      } catch (const std::exception& e) {
        // Out of memory on one huge report, say: that file is skipped, the
        // triage of the others goes on.
        failures[i] = SkippedFile{files[i], to_string(ReportErrorKind::kIo),
                                  fmt::format("{}: cannot read: {}", files[i], e.what())};
      }
    }
  };
  unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(1, files.size() / 16)));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < jobs; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  std::vector<Entry> good;
  for (size_t i = 0; i < files.size(); ++i) {
    if (failures[i]) {
      skipped.push_back(*failures[i]);
    } else {
      good.push_back(std::move(entries[i]));
    }
  }
  return group(std::move(good), std::move(skipped));
}

}  // namespace faultline::report
