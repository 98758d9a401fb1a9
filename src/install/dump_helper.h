// faultline_dump_now()'s live dump by helper (core/signal/helper_dump.h
// tells how it works), and finding the `faultline` command it runs, which
// the dump-signal handler cannot do (no realpath, no dladdr there): found at
// install when a dump signal is installed, else at the first dump. doc/cli.md
// tells how the command is found. Normal program context, never a signal
// handler.
#pragma once

#include <stddef.h>

namespace faultline::core {

// Asks the helper for a dump of this process. true: it wrote the report
// (last_report_path() names it, dumps_written() counts it). false: *why
// (NUL-terminated, at most why_size bytes) says why not.
bool dump_by_helper(char* why, size_t why_size);

// Finds the command for the helper, once (later calls do nothing).
void prepare_dump_helper();

}  // namespace faultline::core
