// A live dump asked for inside the process (faultline_dump_now(), the
// Python package's dump_traceback) captured from outside it: the library
// starts the `faultline` command as a helper, allows that one process to
// trace it (prctl PR_SET_PTRACER), and waits while the helper stops every
// thread with ptrace, reads them and writes the report. No signal is sent,
// so no system call of the program fails with EINTR (a ptrace stop restarts
// it). The program never sees the helper: it is a child with no exit
// signal (no SIGCHLD; waitpid(-1) and wait() do not see it), started with
// only the descriptors it needs, reaped here with __WALL.
//
// Where that cannot be done (no command found, ptrace refused by Yama,
// seccomp or a container, the helper failed), the caller falls back to the
// signal request and the report says why (report_writer.h). doc/cli.md
// tells how the command is found. Normal program context, never a signal
// handler.
#pragma once

#include <stddef.h>

namespace faultline::core {

// Asks the helper for a dump of this process. true: it wrote the report
// (last_report_path() names it, dumps_written() counts it). false: *why
// (NUL-terminated, at most why_size bytes) says why not.
bool dump_by_helper(char* why, size_t why_size);

}  // namespace faultline::core
