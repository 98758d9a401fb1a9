// torchrun / torch.distributed.elastic integration: when a worker crashes,
// write the error file its agent reads, so torchrun's failure summary shows
// faultline's diagnosis and stack as the root cause instead of
// "Signal 11 (SIGSEGV) received by PID ...".
//
// The agent gives each worker TORCHELASTIC_ERROR_FILE (a path) and, when the
// worker dies, reads that file as JSON in the format of
// torch.distributed.elastic.multiprocessing.errors.ErrorHandler:
//
//   {"message": {"message": "<one line>",
//                "extraInfo": {"py_callstack": "<text shown as the traceback>",
//                              "timestamp": "<seconds since the epoch>"}}}
//
// Use:
//   torchelastic_init();                       // install time (reads the env)
//   ...
//   write_torchelastic_error_file(c, dir, name);  // crash time, after the report
#pragma once

#include <stdlib.h>

#include "core/crash_state.h"

namespace faultline::core {

// Install time: remembers `path` (nullptr or "" disables; a relative path is
// made absolute against the current directory now, since the crash may come
// after a chdir). Not async-signal-safe with respect to a concurrent crash.
void torchelastic_set_error_file(const char* path);

// Install time: reads TORCHELASTIC_ERROR_FILE. Inline so that getenv is
// compiled into the install-time caller, never into the crash-path objects.
// `first`: the first install, which skips the call when it is unset.
inline void torchelastic_init(bool first = false) {
  // secure_getenv: a setuid/setgid program must not let its caller choose a
  // file it overwrites (nullptr under AT_SECURE).
  const char* path = secure_getenv("TORCHELASTIC_ERROR_FILE");
  if (!first || path) torchelastic_set_error_file(path);
}

// True when an error file will be written.
bool torchelastic_enabled();

// Crash time, async-signal-safe: writes the error file (to a temporary name,
// then renamed over the path) from the capture and its diagnosis. The
// report's directory and file name, when given, are mentioned in it. Does
// nothing unless enabled. Returns true when the file was written.
bool write_torchelastic_error_file(const Capture& c, const char* report_dir = nullptr,
                                   const char* report_name = nullptr);

}  // namespace faultline::core
