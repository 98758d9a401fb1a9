// The report files: written to a random <dir>/.faultline-<random>.tmp and
// renamed with RENAME_NOREPLACE to
// faultline-<time>-<host>-<pid>-<tid>-<random>.json (or .dmp, the minidump,
// under the same stem), so a reader never sees half a file and no file is
// ever replaced; flushed to the disk before the process goes on (after the
// rename on local filesystems, before it on network ones). When no report
// file can be made, the JSON goes to stderr between markers instead.
#pragma once

#include <signal.h>
#include <stddef.h>

namespace faultline::core {

struct Capture;

// SIGXFSZ ignored while it lives: past RLIMIT_FSIZE a write fails with EFBIG
// instead of ending the process mid-file.
struct IgnoreFileSizeSignal {
  struct sigaction old;
  IgnoreFileSizeSignal();
  ~IgnoreFileSizeSignal();
  IgnoreFileSizeSignal(const IgnoreFileSizeSignal&) = delete;
  IgnoreFileSizeSignal& operator=(const IgnoreFileSizeSignal&) = delete;
};

// A new file under a random temporary name in the report directory.
struct ReportTemp {
  int dir_fd;    // the report directory (closed by publish/discard when reopened)
  int fd;        // the temporary file, -1 once closed
  char tmp[64];  // its name, "" once published or removed
  int err;       // errno of the failure
  int sync_err;  // errno of a failed flush of a published file (0: flushed)
  bool flushed;  // flushed (before its rename on a network filesystem)
  bool ordered;  // report_temp_flush_first has run
};

// Creates the temporary file; false (t->err set) if it cannot.
bool report_temp_open(ReportTemp* t);
// On a filesystem whose other readers see only flushed data (network ones,
// unknown ones), flushes the file now, before its rename; elsewhere does
// nothing. False (t->err set) when that flush failed. Idempotent;
// report_temp_rename calls it.
bool report_temp_flush_first(ReportTemp* t);
// Puts it where readers find it: renames it to `name` (when name is "", a
// new name with the extension ext; a name that exists is never replaced:
// another random one is tried and written back into name), on a network
// filesystem after flushing it. False (t->err set) when it could not be,
// the temporary file removed. The descriptor stays open for
// report_temp_finish.
bool report_temp_rename(ReportTemp* t, const Capture& c, const char* ext, char* name, size_t size);
// After report_temp_rename: flushes the file if the rename came first, and
// the directory, then closes. A failed flush leaves the published file
// (a reader may still find it whole) and sets t->sync_err: the caller says
// so, and puts a copy where it can.
void report_temp_finish(ReportTemp* t);
// report_temp_rename, then report_temp_finish when it succeeded.
bool report_temp_publish(ReportTemp* t, const Capture& c, const char* ext, char* name, size_t size);
// Closes and removes the temporary file (idempotent).
void report_temp_discard(ReportTemp* t);

// The report directory: the descriptor opened at install, or, if the
// program closed it (daemons close all fds) or reused its number for another
// file, the directory opened again by its path (the caller closes that one
// when it is not g_crash.config.dir_fd). -1 with *err set if neither.
int report_dir_fd(int* err);

// Writes c as the report file. With announce, also says on stderr where it
// went (announce_report). True when the file was written.
bool write_report(const Capture& c, bool announce);

// Says on stderr where the report went (when stderr output is on), or, when
// it could not be written, puts the whole report there between markers, so
// nothing is lost if stderr is kept.
void announce_report(const Capture& c, bool written);

// The path of the last report written ("" if none), and how many live dumps
// were written.
const char* last_report_path();
int dumps_written();

}  // namespace faultline::core
