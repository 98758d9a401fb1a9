// faultline dump PID: asks a running process for a live report of all
// threads, waits for it and shows it.
#pragma once

#include <CLI/CLI.hpp>

namespace faultline::cli {

// Adds `dump` to `app`; its callback stores the exit status in `status`.
void add_dump_command(CLI::App& app, int& status);

}  // namespace faultline::cli
