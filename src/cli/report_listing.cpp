#include "cli/report_listing.h"

#include <sys/stat.h>

#include <filesystem>

namespace faultline::cli {

namespace fs = std::filesystem;

ReportListing list_reports(const std::string& dir) {
  ReportListing out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("faultline-", 0) != 0 || it->path().extension() != ".json") continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) continue;
    out[name] = {st.st_ino,
                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

std::vector<std::string> new_reports(const ReportListing& before, const ReportListing& now) {
  std::vector<std::string> out;
  for (const auto& [name, id] : now) {
    auto it = before.find(name);
    if (it == before.end() || it->second != id) out.push_back(name);
  }
  return out;
}

std::string absolute_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir.empty() ? "." : dir, ec);
  if (ec) return dir;
  std::string out = p.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace faultline::cli
