// Subcommands of the `faultline` command. Each is defined in its own
// cmd_<name>.cpp and registered by main.cpp. A command's callback returns the
// process exit status: 0 success, 1 the input was bad or a check failed,
// 2 usage error (CLI11's own parse errors also exit 2 — see main.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace faultline::cli {

// Each adds one subcommand to `app`. `status` is where its callback stores the exit status.
void add_symbolize_command(CLI::App& app, int& status);  // cmd_symbolize.cpp (symbolizer)
void add_show_commands(CLI::App& app, int& status);      // cmd_show.cpp: show, markdown, sentry
void add_triage_command(CLI::App& app, int& status);     // cmd_triage.cpp
void add_validate_command(CLI::App& app, int& status);   // cmd_validate.cpp
void add_run_command(CLI::App& app, int& status);        // cmd_run.cpp: run, dump
void add_upload_commands(CLI::App& app, int& status);    // cmd_upload.cpp: upload, watch

// Sends `reports` to Sentry as `faultline upload --dsn DSN` does; returns its exit status.
int upload_after_run(const std::string& dsn, const std::vector<std::string>& reports);

}  // namespace faultline::cli
