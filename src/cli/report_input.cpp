#include "cli/report_input.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "report/render.h"

namespace faultline::cli {

std::optional<report::Report> load_or_complain(const std::string& path) {
  try {
    if (path == "-")
      return report::parse_report(report::read_fd(STDIN_FILENO, "<stdin>"), "<stdin>");
    return report::load_report(path);
  } catch (const report::ReportError& e) {
    fmt::print(stderr, "faultline: {}\n", report::escape_controls(e.what()));
  } catch (const std::exception& e) {
    fmt::print(stderr, "faultline: {}: {}\n", report::escape_controls(path),
               report::escape_controls(e.what()));
  }
  return std::nullopt;
}

bool want_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  const char* term = std::getenv("TERM");
  if (term && std::strcmp(term, "dumb") == 0) return false;
  return isatty(STDOUT_FILENO) == 1;
}

bool print_out(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    if (errno != EPIPE)
      fmt::print(stderr, "faultline: cannot write output: {}\n", std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace faultline::cli
