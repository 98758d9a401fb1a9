// What the report-reading subcommands share: loading a REPORT argument with
// a clear message on failure, and deciding on colors.
#pragma once

#include <optional>
#include <string>

#include "report/report.h"

namespace faultline::cli {

// Exit statuses of every subcommand (see `faultline --help` and doc/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // bad input, a failed check, no report
inline constexpr int kExitUsage = 2;

// Loads `path` ("-": standard input). On failure prints "faultline: <why>" on
// stderr and returns nullopt; never throws.
std::optional<report::Report> load_or_complain(const std::string& path);

// --color=auto|always|never. auto: stdout is a terminal, NO_COLOR is unset or
// empty (no-color.org) and TERM is not "dumb".
bool want_color(const std::string& mode);

// Writes `text` to stdout; false (after a message) when stdout fails.
bool print_out(const std::string& text);

}  // namespace faultline::cli
