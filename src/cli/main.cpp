// The faultline command: renders, symbolizes, validates and groups reports.
// Each subcommand is defined in its own cmd_<name>.cpp and registered here.
// A command's callback stores the process exit status (report_input.h:
// 0 success, 1 the input was bad or a check failed, 2 usage error); CLI11's
// own parse errors also exit 2, below.
#include <cstdio>

#include "cli/cmd_dump.h"
#include "cli/cmd_job.h"
#include "cli/cmd_run.h"
#include "cli/cmd_show.h"
#include "cli/cmd_symbolize.h"
#include "cli/cmd_triage.h"
#include "cli/cmd_upload.h"
#include "cli/cmd_validate.h"

int main(int argc, char** argv) {
  CLI::App app{"faultline: read, render and symbolize crash reports (schema faultline/1)"};
  app.set_version_flag("--version", FAULTLINE_VERSION);
  app.require_subcommand(1);
  int status = 0;
  faultline::cli::add_symbolize_command(app, status);
  faultline::cli::add_show_commands(app, status);
  faultline::cli::add_triage_command(app, status);
  faultline::cli::add_job_command(app, status);
  faultline::cli::add_validate_command(app, status);
  faultline::cli::add_run_command(app, status);
  faultline::cli::add_dump_command(app, status);
  faultline::cli::add_upload_commands(app, status);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return status;
}
