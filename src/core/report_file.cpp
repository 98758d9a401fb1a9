#include "core/report_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>  // renameat
#include <string.h>
#include <unistd.h>

#include "core/capture.h"
#include "core/crash.h"
#include "core/handler_state.h"
#include "core/raw_log.h"
#include "core/report_writer.h"
#include "core/str.h"
#include "core/time_fmt.h"

namespace faultline::core {

void announce_report(const Capture& c, bool written) {
  const Config& cfg = g_crash.config;
  if (written) {
    if (cfg.write_stderr) raw_log("faultline: report written to ", g_handler.last_report, "\n");
    return;
  }
  raw_log("faultline: could not write the report to ", cfg.dir, ": ",
          strerrorname_np(g_handler.write_errno));
  raw_log("\nfaultline: the report follows on stderr\n--- faultline report begin ---\n");
  int ignored = 0;
  write_json_report(c, cfg, raw_log_fd(), &ignored);
  raw_log("--- faultline report end ---\n");
}

bool write_report(const Capture& c, bool announce) {
  const Config& cfg = g_crash.config;
  char stamp[16];
  format_compact(stamp, c.time_sec);
  char name[128], tmp[160];
  StrBuf n(name, sizeof name);
  n.add("faultline-").add(stamp).add("-").add_dec(c.pid).add("-").add_dec(c.tid);
  // Live dumps can come many times a second from one thread: number them.
  if (g_handler.report_sequence > 0) n.add("-").add_dec(g_handler.report_sequence);
  ++g_handler.report_sequence;
  n.add(".json");
  StrBuf t(tmp, sizeof tmp);
  t.add(".").add(name).add(".tmp");

  int err = cfg.dir_fd < 0 ? cfg.dir_errno : 0;
  bool written = false;
  int dir_fd = cfg.dir_fd;
  if (dir_fd >= 0 && !fd_still(dir_fd, g_crash.dir_id)) {
    // The program closed our descriptor (daemons close all fds), or reused
    // its number for another file: open the directory again by its path.
    dir_fd = open(cfg.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) err = errno;
  }
  if (dir_fd >= 0) {
    int fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      err = errno;
    } else {
      g_handler.phase.store(Phase::kWriteReport, std::memory_order_release);
      written = write_json_report(c, cfg, fd, &err);
      if (written && fsync(fd) != 0 && errno != EINVAL) {
        // fsync failing (EIO, ENOSPC on some filesystems) means the data may
        // not be there.
        err = errno;
        written = false;
      }
      close(fd);
      if (written && renameat(dir_fd, tmp, dir_fd, name) != 0) {
        err = errno;
        written = false;
      }
      if (!written) unlinkat(dir_fd, tmp, 0);
    }
    if (dir_fd != cfg.dir_fd) close(dir_fd);
  }
  if (written) {
    StrBuf last(g_handler.last_report, sizeof g_handler.last_report);
    last.add(cfg.dir).add("/").add(name);
  }
  g_handler.write_errno = err;
  if (announce) announce_report(c, written);
  return written;
}

const char* last_report_path() {
  return g_handler.last_report;
}

int dumps_written() {
  return g_handler.dumps_written.load(std::memory_order_acquire);
}

}  // namespace faultline::core
