// faultline validate REPORT...: checks reports against the faultline/1 JSON Schema.
#pragma once

#include <CLI/CLI.hpp>

namespace faultline::cli {

// Adds `validate` to `app`; a callback stores the exit status in `status`.
void add_validate_command(CLI::App& app, int& status);

}  // namespace faultline::cli
