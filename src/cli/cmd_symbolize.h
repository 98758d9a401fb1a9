// faultline symbolize: adds files, lines and inlined frames to a report's
// native frames, or resolves bare addresses in one module (--module).
#pragma once

#include <CLI/CLI.hpp>

namespace faultline::cli {

// Adds `symbolize` to `app`; a callback stores the exit status in `status`.
void add_symbolize_command(CLI::App& app, int& status);

}  // namespace faultline::cli
