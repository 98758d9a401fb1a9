// The program's command line for the report: copied from the arguments
// glibc passes the preload's constructor, else read from
// /proc/self/cmdline at install. Install time only.
#pragma once

namespace faultline::core {

struct Config;

// Set by the preload's constructor when it copied argv into the config:
// the install then leaves the command line alone.
extern bool g_argv_from_constructor;

// Fills cfg->argv from /proc/self/cmdline (NUL-separated, as the kernel
// keeps it), marking it truncated when it does not fit.
void read_cmdline(Config* cfg);

// Copies the path the program was started by (AT_EXECFN) into
// cfg->exec_name.
void read_exec_name(Config* cfg);

}  // namespace faultline::core
