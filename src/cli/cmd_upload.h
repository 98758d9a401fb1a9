// faultline upload REPORT... --dsn DSN: sends reports to Sentry.
// faultline watch DIR --dsn DSN: sends reports as they appear in DIR.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace faultline::cli {

// Adds `upload` and `watch` to `app`; a callback stores the exit status in `status`.
void add_upload_commands(CLI::App& app, int& status);

// Sends `reports` to Sentry as `faultline upload --dsn DSN` does; returns its exit status.
int upload_after_run(const std::string& dsn, const std::vector<std::string>& reports);

}  // namespace faultline::cli
