// faultline triage DIR: groups the reports under a directory by crash signature.
#pragma once

#include <CLI/CLI.hpp>

namespace faultline::cli {

// Adds `triage` to `app`; a callback stores the exit status in `status`.
void add_triage_command(CLI::App& app, int& status);

}  // namespace faultline::cli
