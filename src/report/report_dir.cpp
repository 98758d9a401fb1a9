#include "report/report_dir.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <thread>

namespace faultline::report {

namespace fs = std::filesystem;

namespace {

bool looks_like_report_name(const fs::path& p) {
  std::string name = p.filename().string();
  return p.extension() == ".json" && !name.empty() && name[0] != '.' &&
         name.find(".tmp-") == std::string::npos;
}

}  // namespace

std::vector<std::string> list_report_files(const std::string& dir, bool recursive,
                                           std::vector<SkippedFile>* skipped) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ReportError(ReportErrorKind::kIo, fmt::format("{}: not a directory", dir));
  }
  std::vector<std::string> files;
  auto consider = [&](const fs::directory_entry& de) {
    std::error_code e2;
    // Links are followed; a dangling one is listed as unreadable rather than
    // missed, and a FIFO, socket or device with a report's name is listed as
    // not a file (read_file() refuses it without blocking).
    if (!de.is_directory(e2) && looks_like_report_name(de.path())) {
      files.push_back(de.path().string());
    }
  };
  if (recursive) {
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
        end;
    if (ec) throw ReportError(ReportErrorKind::kIo, fmt::format("{}: {}", dir, ec.message()));
    for (; it != end; it.increment(ec)) {
      if (ec) {
        skipped->push_back({it->path().string(), to_string(ReportErrorKind::kIo), ec.message()});
        ec.clear();
        continue;
      }
      // A subdirectory we may not list: say so instead of silently missing its reports.
      if (it->is_directory(ec) && ::access(it->path().c_str(), R_OK | X_OK) != 0) {
        skipped->push_back({it->path().string(), to_string(ReportErrorKind::kIo),
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
  return files;
}

std::vector<bool> load_reports(const std::vector<std::string>& files, unsigned jobs,
                               const std::function<void(size_t, const Report&)>& use,
                               std::vector<SkippedFile>* skipped) {
  // Reading and parsing dominate; files are independent, so split them
  // across threads, each filling its own slots.
  std::vector<std::optional<SkippedFile>> failures(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      try {
        use(i, load_report(files[i]));
      } catch (const ReportError& e) {
        failures[i] = SkippedFile{files[i], to_string(e.kind()), e.what()};
      } catch (const std::exception& e) {
        // Out of memory on one huge report, say: that file is skipped, the
        // others go on.
        failures[i] = SkippedFile{files[i], to_string(ReportErrorKind::kIo),
                                  fmt::format("{}: cannot read: {}", files[i], e.what())};
      }
    }
  };
  if (!jobs) jobs = std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(1, files.size() / 16)));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < jobs; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  std::vector<bool> used(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    if (failures[i]) {
      skipped->push_back(*failures[i]);
    } else {
      used[i] = true;
    }
  }
  return used;
}

}  // namespace faultline::report
