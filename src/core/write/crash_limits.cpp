#include "core/write/crash_limits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/fd_identity.h"
#include "core/base/raw_log.h"
#include "core/base/str.h"
#include "core/base/time_fmt.h"
#include "core/capture.h"
#include "core/crash_state.h"
#include "core/write/report_file.h"

namespace faultline::core {

namespace {

constexpr char kSpool[] = ".faultline-spool";
constexpr char kStatePrefix[] = ".faultline-limit-";
// The state file: always this many bytes, rewritten in place.
constexpr size_t kStateLen = 96;
// Bounds on the directory cap's work at one crash.
constexpr int kMaxRemovals = 128;   // files removed
constexpr int kMaxPasses = 4;       // listings
constexpr int kMaxEntries = 20000;  // entries examined per listing
constexpr int kBatch = 32;          // oldest files kept from one listing

uid_t effective_uid() {
  return static_cast<uid_t>(syscall(SYS_geteuid));
}

// A file we may trust or count: a regular file of ours with one name.
bool ours(const struct stat& st) {
  return S_ISREG(st.st_mode) && st.st_uid == effective_uid() && st.st_nlink == 1;
}

void close_dir(int dir_fd) {
  if (dir_fd >= 0 && dir_fd != g_crash.config.dir_fd) close(dir_fd);
}

bool valid_signature(const char* s) {
  size_t n = str_nlen(s, 17);
  if (n == 0 || n > 16) return false;
  for (size_t i = 0; i < n; ++i) {
    char ch = s[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  }
  return true;
}

// "1 <window_start> <written> <suppressed> <first_suppressed>\n".
struct LimitState {
  int64_t window_start, written, suppressed, first_suppressed;
};

// Reads the state; anything unreadable or of another version is a fresh one.
void read_state(int fd, LimitState* s) {
  *s = LimitState{};
  char buf[kStateLen + 1];
  ssize_t n = pread(fd, buf, kStateLen, 0);
  if (n <= 0) return;
  int64_t v[5] = {};
  int nv = 0;
  bool in_num = false;
  for (ssize_t i = 0; i < n && buf[i] != '\n' && nv < 5; ++i) {
    char ch = buf[i];
    if (ch >= '0' && ch <= '9') {
      if (v[nv] > (INT64_MAX - 9) / 10) return;
      v[nv] = v[nv] * 10 + (ch - '0');
      in_num = true;
    } else if (ch == ' ') {
      if (in_num) ++nv;
      in_num = false;
    } else {
      return;
    }
  }
  if (in_num) ++nv;
  if (nv < 5 || v[0] != 1) return;
  *s = LimitState{v[1], v[2], v[3], v[4]};
}

void write_state(int fd, const LimitState& s) {
  char buf[kStateLen + 1];
  StrBuf b(buf, sizeof buf);
  b.add("1 ").add_dec(s.window_start).add(" ").add_dec(s.written).add(" ");
  b.add_dec(s.suppressed).add(" ").add_dec(s.first_suppressed);
  // Padded to a fixed length, so a rewrite in place leaves nothing behind.
  while (b.len() < kStateLen - 1) b.add_char(' ');
  b.add_char('\n');
  syscall(SYS_pwrite64, fd, buf, b.len(), 0);
}

}  // namespace

void announce_suppressed(const Capture& c) {
  const Config& cfg = g_crash.config;
  if (!cfg.write_stderr) return;
  char since[32];
  format_iso8601(since, c.suppressed_since, 0);
  char line[256];
  StrBuf b(line, sizeof line);
  b.add("faultline: report suppressed: ").add_dec(static_cast<int64_t>(c.suppressed_count));
  b.add(" crashes of signature ").add(c.signature).add(" since ").add(since);
  b.add(" (FAULTLINE_SAME_CRASH_LIMIT=").add_dec(cfg.same_crash_count).add("/");
  b.add_dec(cfg.same_crash_seconds).add(")\n");
  raw_log(line);
}

bool same_crash_suppressed(Capture* c) {
  c->suppressed_count = 0;
  c->suppressed_since = 0;
  const Config& cfg = g_crash.config;
  // Live dumps and shutdown reports are no crash loop: every rank of a
  // stopped job leaves one, often with one signature (all wait in the same
  // collective), and `faultline job` needs each.
  if (c->kind == CaptureKind::kDump || c->kind == CaptureKind::kShutdown ||
      cfg.same_crash_count <= 0 || cfg.same_crash_seconds <= 0 || !valid_signature(c->signature)) {
    return false;
  }
  // Past RLIMIT_FSIZE the state's write fails (EFBIG) instead of ending the process.
  IgnoreFileSizeSignal no_sigxfsz;
  int err = 0;
  int dir_fd = report_dir_fd(&err);
  if (dir_fd < 0) return false;
  char name[64];
  StrBuf(name, sizeof name).add(kStatePrefix).add(c->signature);
  // Never through a link, and trusted only when it is ours: a file another
  // user planted there could otherwise silence our reports.
  int fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  struct stat st;
  if (fd < 0 || !fd_stat(fd, &st) || !ours(st)) {
    if (fd >= 0) close(fd);
    close_dir(dir_fd);
    return false;
  }
  LimitState s;
  read_state(fd, &s);
  const int64_t now = c->time_sec;
  if (s.window_start <= 0 || now < s.window_start ||
      now - s.window_start >= cfg.same_crash_seconds) {
    s.window_start = now;
    s.written = 0;
  }
  const bool suppress = s.written >= cfg.same_crash_count;
  if (suppress) {
    if (s.suppressed == 0) s.first_suppressed = now;
    ++s.suppressed;
    c->suppressed_count = static_cast<uint64_t>(s.suppressed);
    c->suppressed_since = s.first_suppressed;
  } else {
    ++s.written;
    if (s.suppressed > 0) {
      c->suppressed_count = static_cast<uint64_t>(s.suppressed);
      c->suppressed_since = s.first_suppressed;
    }
    s.suppressed = 0;
    s.first_suppressed = 0;
  }
  write_state(fd, s);
  close(fd);
  if (suppress) {
    // Its minidump, already published, goes with it.
    if (c->minidump_file[0]) unlinkat(dir_fd, c->minidump_file, 0);
    c->minidump_file[0] = '\0';
  }
  close_dir(dir_fd);
  return suppress;
}

namespace {

// The name's stem when it is one of faultline's files ("faultline-*.json"
// or "faultline-*.dmp"): its length, 0 if it is not.
size_t faultline_stem(const char* name) {
  if (!str_starts_with(name, "faultline-")) return 0;
  size_t n = str_len(name);
  if (n > 5 && str_eq(name + n - 5, ".json")) return n - 5;
  if (n > 4 && str_eq(name + n - 4, ".dmp")) return n - 4;
  return 0;
}

// Whether the upload spool lets this file go: no spool, or its stem's
// "sent" marker there. spool_fd: -1 when there is no spool.
bool sent_or_no_spool(int spool_fd, const char* name, size_t stem) {
  if (spool_fd < 0) return true;
  char marker[300];
  StrBuf m(marker, sizeof marker);
  m.add_n(name, stem).add(".sent");
  if (m.truncated()) return false;
  struct stat st;
  // A marker another user planted does not count: ours or root's (the
  // uploader may run as root), a regular file.
  if (syscall(SYS_newfstatat, spool_fd, marker, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  uid_t me = static_cast<uid_t>(syscall(SYS_geteuid));
  return S_ISREG(st.st_mode) && (st.st_uid == me || st.st_uid == 0);
}

// Whether the spool's markers can be believed: the folder is ours or
// root's and nobody else may write into it. Else it keeps everything.
bool spool_trusted(int spool_fd) {
  struct stat st;
  if (syscall(SYS_fstat, spool_fd, &st) != 0) return false;
  uid_t me = static_cast<uid_t>(syscall(SYS_geteuid));
  return (st.st_uid == me || st.st_uid == 0) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

bool same_stem(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// A file that may go, oldest first by the UTC time in its name, then its
// modification time.
struct Candidate {
  char name[256];
  char stamp[16];  // "YYYYMMDDTHHMMSS" from the name ("" when none)
  int64_t mtime_sec, mtime_nsec;
  uint64_t size;
};

bool older(const Candidate& a, const Candidate& b) {
  for (int i = 0; i < 15; ++i) {
    if (a.stamp[i] != b.stamp[i]) return a.stamp[i] < b.stamp[i];
  }
  if (a.mtime_sec != b.mtime_sec) return a.mtime_sec < b.mtime_sec;
  return a.mtime_nsec < b.mtime_nsec;
}

// The oldest files of one listing, oldest first: what a pass removes
// without listing the directory again for each.
Candidate g_oldest[kBatch];
int g_noldest;

void offer(const Candidate& c) {
  int i = g_noldest < kBatch ? g_noldest : kBatch - 1;
  if (g_noldest == kBatch && !older(c, g_oldest[i])) return;
  for (; i > 0 && older(c, g_oldest[i - 1]); --i) g_oldest[i] = g_oldest[i - 1];
  g_oldest[i] = c;
  if (g_noldest < kBatch) ++g_noldest;
}

// The getdents64 buffer: only the crash owner lists the directory.
alignas(8) char g_dents[32768];

struct linux_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// One listing: the total size of faultline's files, and the oldest that may
// go in g_oldest. False when the directory could not be listed.
bool scan(int dir_fd, int spool_fd, const char* keep, size_t keep_stem, uint64_t* total) {
  int list_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (list_fd < 0) return false;
  *total = 0;
  g_noldest = 0;
  int examined = 0;
  for (;;) {
    long n = syscall(SYS_getdents64, list_fd, g_dents, sizeof g_dents);
    if (n <= 0) break;
    for (long off = 0; off < n && examined < kMaxEntries; ++examined) {
      const linux_dirent64* d = reinterpret_cast<const linux_dirent64*>(g_dents + off);
      off += d->d_reclen;
      if (d->d_type != DT_REG && d->d_type != DT_UNKNOWN) continue;
      size_t stem = faultline_stem(d->d_name);
      if (stem == 0) continue;
      struct stat st;
      if (syscall(SYS_newfstatat, dir_fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !ours(st)) {
        continue;
      }
      *total += static_cast<uint64_t>(st.st_size);
      if (stem == keep_stem && same_stem(d->d_name, keep, stem)) continue;
      if (!sent_or_no_spool(spool_fd, d->d_name, stem)) continue;
      static Candidate c;
      str_copy(c.name, sizeof c.name, d->d_name);  // NAME_MAX is 255
      c.stamp[0] = '\0';
      // "faultline-" and the stamp "YYYYMMDDTHHMMSS".
      if (stem >= 25) str_copy_n(c.stamp, sizeof c.stamp, d->d_name + 10, 15);
      c.mtime_sec = st.st_mtim.tv_sec;
      c.mtime_nsec = st.st_mtim.tv_nsec;
      c.size = static_cast<uint64_t>(st.st_size);
      offer(c);
    }
    if (examined >= kMaxEntries) break;
  }
  close(list_fd);
  return true;
}

}  // namespace

void enforce_dir_limit(const char* keep) {
  const Config& cfg = g_crash.config;
  if (cfg.dir_limit_bytes == 0) return;
  int err = 0;
  int dir_fd = report_dir_fd(&err);
  if (dir_fd < 0) return;
  // With a spool (an uploader works here), only what it has sent may go;
  // a spool we cannot read keeps everything.
  int spool_fd = openat(dir_fd, kSpool, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (spool_fd >= 0 && !spool_trusted(spool_fd)) {
    close(spool_fd);
    return;
  }
  if (spool_fd >= 0 || errno == ENOENT) {
    size_t keep_stem = faultline_stem(keep ? keep : "");
    int removed = 0;
    for (int pass = 0; pass < kMaxPasses && removed < kMaxRemovals; ++pass) {
      uint64_t total = 0;
      if (!scan(dir_fd, spool_fd, keep ? keep : "", keep_stem, &total)) break;
      if (total <= cfg.dir_limit_bytes || g_noldest == 0) break;
      for (int i = 0; i < g_noldest && total > cfg.dir_limit_bytes && removed < kMaxRemovals; ++i) {
        if (unlinkat(dir_fd, g_oldest[i].name, 0) != 0) continue;
        total -= g_oldest[i].size < total ? g_oldest[i].size : total;
        ++removed;
      }
      if (total <= cfg.dir_limit_bytes) break;
    }
  }
  if (spool_fd >= 0) close(spool_fd);
  close_dir(dir_fd);
}

}  // namespace faultline::core
