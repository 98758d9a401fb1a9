#include "core/report_file.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>  // RENAME_NOREPLACE
#include <signal.h>
#include <stdio.h>  // renameat
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>  // GRND_NONBLOCK
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/capture.h"
#include "core/crash.h"
#include "core/handler_state.h"
#include "core/raw_log.h"
#include "core/report_writer.h"
#include "core/sigaction_real.h"
#include "core/str.h"
#include "core/sys.h"
#include "core/time_fmt.h"

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

// faultline-<UTC>-<host>-<pid>-<tid>-<random>.json: unique across hosts
// sharing a directory, pid namespaces (every container's pid 1), and calls.
void make_name(const Capture& c, char* name, size_t size) {
  char stamp[16];
  format_compact(stamp, c.time_sec);
  StrBuf n(name, size);
  n.add("faultline-").add(stamp).add("-");
  add_host(n);
  n.add("-").add_dec(c.pid).add("-").add_dec(c.tid).add("-");
  add_random(n);
  n.add(".json");
}

// Moves `tmp` to a new name; never replaces an existing file (another
// process's report, or anything a user put there). On a name that exists,
// tries another random one.
bool publish(const Capture& c, int dir_fd, const char* tmp, char* name, size_t size, int* err) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    if (attempt > 0) make_name(c, name, size);
    long rc = syscall(SYS_renameat2, dir_fd, tmp, dir_fd, name, RENAME_NOREPLACE);
    if (rc == 0) return true;
    int e = errno;
    if (e == EEXIST) continue;
    if (e != EINVAL && e != ENOSYS) {
      *err = e;
      return false;
    }
    // A filesystem without RENAME_NOREPLACE: link(2) never replaces either.
    if (syscall(SYS_linkat, dir_fd, tmp, dir_fd, name, 0) == 0) {
      unlinkat(dir_fd, tmp, 0);
      return true;
    }
    e = errno;
    if (e == EEXIST) continue;
    if (e != EPERM && e != EOPNOTSUPP && e != ENOSYS) {
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

// Restores SIGXFSZ's disposition when the write is over.
struct IgnoreFileSizeSignal {
  struct sigaction old;
  IgnoreFileSizeSignal() {
    // Past RLIMIT_FSIZE a write raises SIGXFSZ, which would end the process
    // mid-report (exit 153, no report, no stderr copy). Ignored, the write
    // fails with EFBIG and the stderr fallback runs.
    struct sigaction ign = {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    real_sigaction(SIGXFSZ, &ign, &old);
  }
  ~IgnoreFileSizeSignal() { real_sigaction(SIGXFSZ, &old, nullptr); }
};

}  // namespace

void announce_report(const Capture& c, bool written) {
  IgnoreFileSizeSignal no_sigxfsz;
  const Config& cfg = g_crash.config;
  if (written) {
    if (cfg.write_stderr) {
      // The path is the program's choice (FAULTLINE_DIR, report_dir): it
      // may hold control characters, escaped like the rest of the text.
      raw_log("faultline: report written to ");
      write_escaped_line(g_handler.last_report,
                         str_nlen(g_handler.last_report, sizeof g_handler.last_report));
    }
    return;
  }
  raw_log("faultline: could not write the report to ");
  write_escaped_line(cfg.dir, str_nlen(cfg.dir, sizeof cfg.dir), /*newline=*/false);
  raw_log(": ", strerrorname_np(g_handler.write_errno));
  raw_log("\nfaultline: the report follows on stderr\n--- faultline report begin ---\n");
  int ignored = 0;
  int fd = raw_log_fd();
  if (fd == 2) fd = stderr_fd();  // the stderr of install time, or nothing
  if (fd >= 0) write_json_report(c, cfg, fd, &ignored);
  raw_log("--- faultline report end ---\n");
}

bool write_report(const Capture& c, bool announce) {
  IgnoreFileSizeSignal no_sigxfsz;
  const Config& cfg = g_crash.config;
  char name[160], tmp[64];
  make_name(c, name, sizeof name);

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
    // A random temporary name: in a shared sticky directory another user
    // cannot guess it to block the report with a file of their own.
    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
      StrBuf t(tmp, sizeof tmp);
      t.add(".faultline-");
      add_random(t);
      t.add(".tmp");
      fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0 && errno != EEXIST) break;
    }
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
      if (written) written = publish(c, dir_fd, tmp, name, sizeof name, &err);
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
