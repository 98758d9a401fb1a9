#include "cli/proc_status.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace faultline::cli {

std::optional<unsigned long long> status_mask(const std::string& path, const char* field) {
  std::ifstream status(path);
  std::string prefix = std::string(field) + ":";
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::string hex = line.substr(prefix.size());
    hex.erase(0, hex.find_first_not_of(" \t"));
    errno = 0;
    char* end = nullptr;
    unsigned long long mask = std::strtoull(hex.c_str(), &end, 16);
    if (errno != 0 || end == hex.c_str()) return std::nullopt;
    return mask;
  }
  return std::nullopt;
}

}  // namespace faultline::cli
