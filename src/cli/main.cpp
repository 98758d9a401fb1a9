// The faultline command: renders, symbolizes, validates and groups reports.
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"faultline: read, render and symbolize crash reports (schema faultline/1)"};
  app.set_version_flag("--version", FAULTLINE_VERSION);
  app.require_subcommand(1);
  int status = 0;
  faultline::cli::add_symbolize_command(app, status);
  faultline::cli::add_show_commands(app, status);
  faultline::cli::add_triage_command(app, status);
  faultline::cli::add_validate_command(app, status);
  faultline::cli::add_run_command(app, status);
  faultline::cli::add_upload_commands(app, status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return status;
}
