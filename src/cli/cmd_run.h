// faultline run -- CMD...: runs a command with libfaultline.so preloaded,
// exits as the command did and says where its new reports are.
#pragma once

#include <CLI/CLI.hpp>

namespace faultline::cli {

// Adds `run` to `app`; its callback stores the exit status in `status`.
void add_run_command(CLI::App& app, int& status);

}  // namespace faultline::cli
