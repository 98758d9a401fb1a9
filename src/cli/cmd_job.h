// faultline job DIR: one answer per distributed job: which rank failed
// first, where every other rank was, which ranks left no report.
#pragma once

#include <CLI/CLI.hpp>

namespace faultline::cli {

// Adds `job` to `app`; a callback stores the exit status in `status`.
void add_job_command(CLI::App& app, int& status);

}  // namespace faultline::cli
