#include "core/write/report_file.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>  // RENAME_NOREPLACE
#include <signal.h>
#include <stdio.h>  // renameat
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>  // GRND_NONBLOCK
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/base/raw_log.h"
#include "core/base/sigaction_real.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/base/time_fmt.h"
#include "core/capture.h"
#include "core/crash_state.h"
#include "core/handler_state.h"
#include "core/write/report_writer.h"
#include "core/write/stderr_summary.h"

namespace faultline::core {

namespace {

// 64 random bits: getrandom(2) (never blocks with GRND_NONBLOCK once the
// pool is ready, which it is long before a crash), else the process's
// AT_RANDOM bytes stirred with the clock and a counter. No heap, no locks.
uint64_t random64() {
  uint64_t v = 0;
  if (syscall(SYS_getrandom, &v, sizeof v, GRND_NONBLOCK) == static_cast<long>(sizeof v)) return v;
  static uint64_t counter = 0;
  uint64_t seed = 0;
  if (const auto* at = reinterpret_cast<const uint64_t*>(getauxval(AT_RANDOM)))
    seed = at[0] ^ at[1];
  struct timespec ts = {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t x = seed ^ (static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec) ^
               (++counter * 0x9e3779b97f4a7c15ull) ^ static_cast<uint64_t>(sys_gettid());
  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void add_random(StrBuf& b) {
  char hex[24];
  size_t n = fmt_hex(hex, random64());  // "0x..." lower case
  b.add_n(hex + 2, n - 2);
}

// The host name as a file-name part: letters, digits, '.', '_'; anything
// else becomes '_'; at most 32 characters.
void add_host(StrBuf& b) {
  struct utsname u;
  if (uname(&u) != 0 || !u.nodename[0]) {
    b.add("host");
    return;
  }
  for (size_t i = 0; i < 32 && u.nodename[i]; ++i) {
    char ch = u.nodename[i];
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_';
    b.add_char(ok ? ch : '_');
  }
}

// faultline-<UTC>-<host>-<pid>-<tid>-<random><ext>: unique across hosts
// sharing a directory, pid namespaces (every container's pid 1), and calls.
void make_name(const Capture& c, char* name, size_t size, const char* ext) {
  char stamp[16];
  format_compact(stamp, c.time_sec);
  StrBuf n(name, size);
  n.add("faultline-").add(stamp).add("-");
  add_host(n);
  n.add("-").add_dec(c.pid).add("-").add_dec(c.tid).add("-");
  add_random(n);
  n.add(ext);
}

// Whether a failed call says "not here" rather than "not possible": the
// filesystem lacks the operation (EINVAL, EOPNOTSUPP), the kernel lacks the
// call (ENOSYS), or a seccomp filter refused it (container runtimes answer
// EPERM or EACCES, some ENOSYS). The next, older way may still work.
bool not_supported_here(int e) {
  return e == EINVAL || e == ENOSYS || e == EPERM || e == EACCES || e == EOPNOTSUPP;
}

// Moves `tmp` to `name`; never replaces an existing file (another process's
// report, or anything a user put there). On a name that exists, tries
// another random one.
bool publish(const Capture& c, int dir_fd, const char* tmp, char* name, size_t size,
             const char* ext, int* err) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    if (attempt > 0) make_name(c, name, size, ext);
    long rc = syscall(SYS_renameat2, dir_fd, tmp, dir_fd, name, RENAME_NOREPLACE);
    if (rc == 0) return true;
    int e = errno;
    if (e == EEXIST) continue;
    if (!not_supported_here(e)) {
      *err = e;
      return false;
    }
    // A filesystem without RENAME_NOREPLACE, or a filter that refuses
    // renameat2: link(2) never replaces either.
    if (syscall(SYS_linkat, dir_fd, tmp, dir_fd, name, 0) == 0) {
      unlinkat(dir_fd, tmp, 0);
      return true;
    }
    e = errno;
    if (e == EEXIST) continue;
    if (!not_supported_here(e)) {
      *err = e;
      return false;
    }
    // Nor hard links (vfat, exFAT, some FUSE filesystems): a plain rename
    // once the name is seen free. The name has a random part, so only a
    // writer who guessed it could be replaced in between.
    struct stat st;
    if (syscall(SYS_newfstatat, dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) continue;
    if (errno != ENOENT) {
      *err = errno;
      return false;
    }
    if (renameat(dir_fd, tmp, dir_fd, name) == 0) return true;
    *err = errno;
    return false;
  }
  *err = EEXIST;
  return false;
}

}  // namespace

int report_dir_fd(int* err) {
  const Config& cfg = g_crash.config;
  int dir_fd = cfg.dir_fd;
  if (dir_fd < 0) {
    *err = cfg.dir_errno;
    return -1;
  }
  if (!fd_still(dir_fd, g_crash.dir_id)) {
    dir_fd = open(cfg.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) *err = errno;
  }
  return dir_fd;
}

IgnoreFileSizeSignal::IgnoreFileSizeSignal() {
  // Past RLIMIT_FSIZE a write raises SIGXFSZ, which would end the process
  // mid-report (exit 153, no report, no stderr copy). Ignored, the write
  // fails with EFBIG and the stderr fallback runs.
  struct sigaction ign = {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  real_sigaction(SIGXFSZ, &ign, &old);
}

IgnoreFileSizeSignal::~IgnoreFileSizeSignal() {
  real_sigaction(SIGXFSZ, &old, nullptr);
}

bool report_temp_open(ReportTemp* t) {
  t->fd = -1;
  t->tmp[0] = '\0';
  t->err = 0;
  t->sync_err = 0;
  t->flushed = false;
  t->ordered = false;
  t->dir_fd = report_dir_fd(&t->err);
  if (t->dir_fd < 0) return false;
  // A random temporary name: in a shared sticky directory another user
  // cannot guess it to block the report with a file of their own.
  for (int attempt = 0; attempt < 16 && t->fd < 0; ++attempt) {
    StrBuf n(t->tmp, sizeof t->tmp);
    n.add(".faultline-");
    add_random(n);
    n.add(".tmp");
    t->fd = openat(t->dir_fd, t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (t->fd < 0 && errno != EEXIST) break;
  }
  if (t->fd >= 0) return true;
  t->err = errno;
  t->tmp[0] = '\0';
  report_temp_discard(t);
  return false;
}

namespace {

// Whether every reader of a file in the directory sees what was written to
// it before it is flushed: local filesystems, whose readers share this
// kernel's page cache. On the others (NFS, SMB, FUSE, cluster filesystems)
// a reader on another host sees what reached the server, which a network
// filesystem sends at the flush or the close (close-to-open consistency):
// renamed first, the report would be empty or cut there. Unknown ones and
// a refused fstatfs count as the others.
bool readers_share_page_cache(int dir_fd) {
  struct statfs fs;
  if (syscall(SYS_fstatfs, dir_fd, &fs) != 0) return false;
  switch (static_cast<uint32_t>(fs.f_type)) {
    case 0xEF53u:      // ext2, ext3, ext4
    case 0x58465342u:  // XFS
    case 0x9123683Eu:  // btrfs
    case 0x01021994u:  // tmpfs
    case 0x858458F6u:  // ramfs
    case 0x794C7630u:  // overlayfs (containers)
    case 0x2FC12FC1u:  // ZFS
    case 0xF2F52010u:  // F2FS
    case 0xCA451A4Eu:  // bcachefs
      return true;
    default:
      return false;
  }
}

}  // namespace

bool report_temp_flush_first(ReportTemp* t) {
  if (t->ordered) return true;
  t->ordered = true;
  // On a local filesystem renamed first, flushed after (report_temp_finish):
  // the file is whole for every reader once its last write returned, so a
  // reader sees it without waiting for the flush (a cache flush of the
  // device: ~1-5 ms on a virtual disk, seconds behind a job's checkpoint
  // writes), and a flush that never returns leaves it named, not hidden.
  // Elsewhere flushed first: a reader on another host would see it empty.
  if (readers_share_page_cache(t->dir_fd)) return true;
  t->flushed = true;
  // EINVAL: a file that cannot be flushed (a pipe, some special files).
  if (fsync(t->fd) != 0 && errno != EINVAL) {
    t->err = errno;  // the data may not be there
    return false;
  }
  return true;
}

bool report_temp_rename(ReportTemp* t, const Capture& c, const char* ext, char* name, size_t size) {
  if (!report_temp_flush_first(t)) {
    report_temp_discard(t);
    return false;
  }
  if (!name[0]) make_name(c, name, size, ext);
  if (!publish(c, t->dir_fd, t->tmp, name, size, ext, &t->err)) {
    report_temp_discard(t);
    return false;
  }
  t->tmp[0] = '\0';
  return true;
}

void report_temp_finish(ReportTemp* t) {
  if (!t->flushed && t->fd >= 0 && fsync(t->fd) != 0 && errno != EINVAL) t->sync_err = errno;
  t->flushed = true;
  // The name: the directory's flush, where the filesystem has one.
  if (t->sync_err == 0 && t->dir_fd >= 0 && fsync(t->dir_fd) != 0 && errno != EINVAL &&
      errno != EROFS && errno != EBADF && errno != ENOTSUP) {
    t->sync_err = errno;
  }
  report_temp_discard(t);
}

bool report_temp_publish(ReportTemp* t, const Capture& c, const char* ext, char* name,
                         size_t size) {
  if (!report_temp_rename(t, c, ext, name, size)) return false;
  report_temp_finish(t);
  return true;
}

void report_temp_discard(ReportTemp* t) {
  if (t->fd >= 0) close(t->fd);
  t->fd = -1;
  if (t->dir_fd >= 0 && t->tmp[0]) unlinkat(t->dir_fd, t->tmp, 0);
  t->tmp[0] = '\0';
  if (t->dir_fd >= 0 && t->dir_fd != g_crash.config.dir_fd) close(t->dir_fd);
  t->dir_fd = -1;
}

namespace {

// The whole report on stderr between markers.
void report_copy_to_stderr(const Capture& c, const Config& cfg) {
  raw_log("--- faultline report begin ---\n");
  int ignored = 0;
  int fd = raw_log_fd();
  if (fd == 2) fd = stderr_fd();  // the stderr of install time, or nothing
  if (fd >= 0) write_json_report(c, cfg, fd, &ignored);
  raw_log("--- faultline report end ---\n");
}

}  // namespace

void announce_report(const Capture& c, bool written) {
  const Config& cfg = g_crash.config;
  // FAULTLINE_STDERR=0: nothing on stderr at all, not even the copy (the
  // watchdog's stand-in calls this too).
  if (!cfg.write_stderr) return;
  // Through the Python package a dump's text is faulthandler's alone.
  if (report_announcement_off(c)) return;
  IgnoreFileSizeSignal no_sigxfsz;
  if (written) {
    // The path is the program's choice (FAULTLINE_DIR, report_dir): it may
    // hold control characters, escaped like the rest of the text.
    const size_t len = str_nlen(g_handler.last_report, sizeof g_handler.last_report);
    if (g_handler.write_errno != 0) {
      // Published, but its flush failed: the file may not last (after a
      // failed writeback the kernel may drop its pages), so the report
      // goes to stderr too.
      raw_log("faultline: report written to ");
      write_escaped_line(g_handler.last_report, len, /*newline=*/false);
      raw_log(" but not flushed to the disk: ", strerrorname_np(g_handler.write_errno));
      raw_log("\nfaultline: a copy follows on stderr\n");
      report_copy_to_stderr(c, cfg);
    } else {
      raw_log("faultline: report written to ");
      write_escaped_line(g_handler.last_report, len);
    }
    return;
  }
  raw_log("faultline: could not write the report to ");
  write_escaped_line(cfg.dir, str_nlen(cfg.dir, sizeof cfg.dir), /*newline=*/false);
  raw_log(": ", strerrorname_np(g_handler.write_errno));
  raw_log("\nfaultline: the report follows on stderr\n");
  report_copy_to_stderr(c, cfg);
}

bool write_report(const Capture& c, bool announce) {
  IgnoreFileSizeSignal no_sigxfsz;
  const Config& cfg = g_crash.config;
  // The minidump's name stem when there is one: the two files pair up.
  char name[160] = "";
  if (c.minidump_file[0]) {
    StrBuf n(name, sizeof name);
    size_t len = str_len(c.minidump_file);
    n.add_n(c.minidump_file, len > 4 ? len - 4 : len).add(".json");  // "<stem>.dmp"
  }
  bool written = false;
  ReportTemp t;
  if (report_temp_open(&t)) {
    g_handler.phase.store(Phase::kWriteReport, std::memory_order_release);
    written = write_json_report(c, cfg, t.fd, &t.err);
    if (written) {
      written = report_temp_publish(&t, c, ".json", name, sizeof name);
    } else {
      report_temp_discard(&t);
    }
  }
  if (written) {
    StrBuf last(g_handler.last_report, sizeof g_handler.last_report);
    last.add(cfg.dir).add("/").add(name);
  }
  g_handler.write_errno = written ? t.sync_err : t.err;
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
