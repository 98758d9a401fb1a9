// faultline show | markdown | sentry | explain: one report, rendered.
#pragma once

#include <CLI/CLI.hpp>

namespace faultline::cli {

// Adds `show`, `markdown` and `sentry` to `app`; a callback stores the exit status in `status`.
void add_show_commands(CLI::App& app, int& status);

}  // namespace faultline::cli
