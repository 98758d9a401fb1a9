// `faultline symbolize`: adds files, lines and inlined frames to a report's
// native frames, or resolves bare addresses in one module (--module).
//
//   faultline symbolize faultline-....json -o symbolized.json
//   faultline symbolize --module ./server 0x4011a6 0x4012f0
//   nm -C ./server | ... | faultline symbolize --module ./server --json
#include "cli/cmd_symbolize.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/output_file.h"
#include "report/render.h"
#include "report/report.h"
#include "symbolize/report_symbolizer.h"
#include "symbolize/symbolize.h"

namespace faultline::cli {
namespace {

namespace sym = faultline::symbolize;

struct SymbolizeOptions {
  std::vector<std::string> inputs;  // the report, or with --module the addresses
  std::string output;
  std::vector<std::string> debug_dirs;
  bool in_place = false;
  std::string module;
  bool json = false;
  std::string network_budget;  // seconds; "" = FAULTLINE_NETWORK_BUDGET or 10
};

constexpr int kOk = 0;
constexpr int kBadInput = 1;
constexpr int kUsage = 2;

void error(const std::string& message) {
  std::fprintf(stderr, "faultline symbolize: %s\n", message.c_str());
}

// Reads a whole report (a regular file, at most report::kMaxReportBytes,
// never blocking on a FIFO); on failure sets *why.
bool read_file(const std::string& path, std::string* text, std::string* why) {
  try {
    *text = faultline::report::read_file(path);
    return true;
  } catch (const faultline::report::ReportError& e) {
    std::string msg = e.what();
    *why = msg.rfind(path + ": ", 0) == 0 ? msg.substr(path.size() + 2) : msg;
    return false;
  }
}

int symbolize_report_file(const SymbolizeOptions& o, sym::Symbolizer& symbolizer) {
  const std::string& path = o.inputs[0];
  std::string text, why;
  if (!read_file(path, &text, &why)) {
    error("cannot read " + path + ": " + why);
    return kBadInput;
  }
  nlohmann::ordered_json report;
  sym::ReportStats stats;
  try {
    report = sym::parse_report(text);
    stats = sym::symbolize_report(report, symbolizer);
  } catch (const sym::BadReport& e) {
    error(path + ": " + e.what());
    return kBadInput;
  }
  // Debug info that could not be used is worth a line on stderr: it is why
  // frames stay without lines.
  for (const auto& m : report.value("modules", nlohmann::ordered_json::array())) {
    if (!m.is_object() || !m.contains("debug_source") || !m["debug_source"].is_string()) continue;
    std::string reason = m.contains("debug_error") && m["debug_error"].is_string()
                             ? m["debug_error"].get<std::string>()
                             : std::string();
    if (m["debug_source"] == sym::to_string(sym::DebugSource::kBuildIdMismatch)) {
      error("warning: " + (reason.empty() ? std::string("build-id mismatch") : reason) +
            "; its frames keep no lines");
    } else if (m["debug_source"] == sym::to_string(sym::DebugSource::kNone) &&
               reason.find("debuginfod:") != std::string::npos && m.contains("path") &&
               m["path"].is_string()) {
      // Which modules went without what the network would have given, and why.
      error("warning: " + report::escape_controls(m["path"].get<std::string>()) + ": " +
            report::escape_controls(reason) + "; its frames keep no lines");
    }
  }
  // Strings from DWARF are not always UTF-8: replace what JSON cannot carry
  // rather than fail.
  std::string out = report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (o.in_place || !o.output.empty()) {
    const std::string& dest = o.in_place ? path : o.output;
    if (!write_output_file(dest, out, &why)) {
      error(why);
      return kBadInput;
    }
    std::fprintf(stderr, "faultline symbolize: %s: %d of %d native frames named, %d with lines\n",
                 dest.c_str(), stats.named, stats.native_frames, stats.with_lines);
    return kOk;
  }
  if (!write_all_fd(STDOUT_FILENO, out)) {
    error(std::string("cannot write the output: ") + std::strerror(errno));
    return kBadInput;
  }
  return kOk;
}

std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// One block per address, in llvm-symbolizer's layout with the address first:
//   0x1139
//   inlined_callee
//   /src/a.h:12:3
//   caller
//   /src/a.c:40:10
//   <empty line>
// With --json, one object per line instead.
void print_address(FILE* out, const std::string& text, const sym::AddressInfo& info, bool json) {
  if (json) {
    std::string line = "{\"address\":" + json_string(text) + ",\"frames\":[";
    for (size_t i = 0; i < info.frames.size(); ++i) {
      const auto& f = info.frames[i];
      if (i) line += ",";
      line += "{\"function\":" + json_string(f.function) + ",\"file\":" + json_string(f.file) +
              ",\"line\":" + std::to_string(f.line) + ",\"column\":" + std::to_string(f.column) +
              "}";
    }
    line += "]}\n";
    std::fputs(line.c_str(), out);
    return;
  }
  std::string block = text + "\n";
  if (info.frames.empty()) block += "??\n??:0:0\n";
  for (const auto& f : info.frames) {
    block += (f.function.empty() ? "??" : f.function) + "\n";
    block += (f.file.empty() ? "??" : f.file) + ":" + std::to_string(f.line) + ":" +
             std::to_string(f.column) + "\n";
  }
  block += "\n";
  std::fputs(block.c_str(), out);
}

int symbolize_addresses(const SymbolizeOptions& o, sym::Symbolizer& symbolizer) {
  sym::Module* module = &symbolizer.module(o.module, "");
  if (!module->usable()) {
    error(module->error().empty() ? o.module + ": cannot be used" : module->error());
    return kBadInput;
  }
  if (!module->error().empty() && !module->damaged()) error("warning: " + module->error());
  int status = kOk;
  auto one = [&](const std::string& token) {
    uint64_t address = 0;
    if (!sym::parse_address(token, &address)) {
      error("not an address: '" + token + "' (expected 0x-prefixed hex or decimal)");
      status = kBadInput;
      return;
    }
    print_address(stdout, token, module->lookup(address), o.json);
  };
  // Damaged DWARF still gives what it can, but the exit status says so.
  auto finish = [&] {
    if (module->damaged()) {
      error(module->error());
      status = kBadInput;
    }
    return status;
  };
  if (!o.inputs.empty()) {
    for (const auto& a : o.inputs) one(a);
    return finish();
  }
  // Addresses on stdin, any white space between them. Flushing per line
  // lets a script drive this as a co-process, one line in, one block out.
  char line[4096];
  while (std::fgets(line, sizeof line, stdin)) {
    char* save = nullptr;
    for (char* tok = strtok_r(line, " \t\r\n", &save); tok;
         tok = strtok_r(nullptr, " \t\r\n", &save))
      one(tok);
    std::fflush(stdout);
  }
  return finish();
}

// Seconds: a plain non-negative number ("10", "2.5").
bool parse_seconds(const std::string& text, double* out) {
  if (text.empty() || text.size() > 12) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(v >= 0) || v > 86400) return false;
  *out = v;
  return true;
}

// A debuginfod fetch cut off at the network budget may still be inside its
// library (it stops at its next progress call): the run does not wait for
// it, and ends without running the libraries' exit handlers under it.
int finish(const sym::Symbolizer& symbolizer, int status) {
  if (symbolizer.network_pending()) {
    std::fflush(nullptr);
    std::_Exit(status);
  }
  return status;
}

int run_symbolize(const SymbolizeOptions& o) {
  sym::SearchOptions search;
  search.debug_dirs = o.debug_dirs;
  const char* env_budget = std::getenv("FAULTLINE_NETWORK_BUDGET");
  if (!o.network_budget.empty()) {
    if (!parse_seconds(o.network_budget, &search.network_budget_s)) {
      error("--network-budget " + report::escape_controls(o.network_budget) +
            ": expected seconds (a number >= 0)");
      return kUsage;
    }
  } else if (env_budget && *env_budget && !parse_seconds(env_budget, &search.network_budget_s)) {
    error("FAULTLINE_NETWORK_BUDGET=" + report::escape_controls(env_budget) +
          ": expected seconds (a number >= 0)");
    return kUsage;
  }
  // A list of usual places may name one this machine lacks: looked past,
  // but said, so a mistyped one does not find nothing in silence.
  for (const std::string& d : o.debug_dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(d, ec)) {
      error("--debug-dir " + report::escape_controls(d) + ": not a directory; looked past");
    }
  }
  sym::Symbolizer symbolizer(search);
  if (!o.module.empty()) {
    if (o.in_place || !o.output.empty()) {
      error("-o and --in-place apply to reports, not to --module");
      return kUsage;
    }
    return finish(symbolizer, symbolize_addresses(o, symbolizer));
  }
  if (o.inputs.size() != 1) {
    error(o.inputs.empty() ? "expected a report (or --module FILE ADDR...)"
                           : "expected one report, got " + std::to_string(o.inputs.size()));
    return kUsage;
  }
  if (o.in_place && !o.output.empty()) {
    error("--in-place and -o exclude each other");
    return kUsage;
  }
  if (o.json) {
    error("--json applies to --module");
    return kUsage;
  }
  return finish(symbolizer, symbolize_report_file(o, symbolizer));
}

}  // namespace

void add_symbolize_command(CLI::App& app, int& status) {
  auto opts = std::make_shared<SymbolizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "symbolize",
      "Add function, file, line and inlined calls to native frames using DWARF (offline)");
  cmd->add_option("inputs", opts->inputs,
                  "REPORT.json; with --module, addresses in the module's ELF address space "
                  "(read from stdin when none are given)");
  cmd->add_option("-o,--output", opts->output,
                  "Write the symbolized report here (default: stdout)");
  cmd->add_flag("--in-place", opts->in_place, "Replace REPORT.json with the symbolized report");
  cmd->add_option("--debug-dir", opts->debug_dirs,
                  "Also look for debug files here (by build-id, debuglink or name); repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--module", opts->module, "Resolve bare addresses in this ELF file");
  cmd->add_flag("--json", opts->json, "With --module: one JSON object per address");
  cmd->add_option("--network-budget", opts->network_budget,
                  "Seconds the whole run may wait for debuginfod servers (default 10, or "
                  "FAULTLINE_NETWORK_BUDGET; 0: ask none)");
  cmd->callback([opts, &status] {
    try {
      status = run_symbolize(*opts);
    } catch (const std::exception& e) {
      // Nothing should get here; if something does, it is still bad input
      // with a message, not a crash.
      error(std::string("internal error: ") + e.what());
      status = kBadInput;
    }
  });
}

}  // namespace faultline::cli
