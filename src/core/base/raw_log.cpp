#include "core/base/raw_log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "core/base/fd_identity.h"
#include "core/base/start_text.h"
#include "core/base/str.h"

namespace faultline::core {

// A descriptor that stayed unwritable for a second (a pipe nobody reads) is
// given up on for the rest of the process's life: the handler must finish.
int g_stuck_fd = -1;
int g_log_fd = 2;

int raw_log_fd() {
  return __atomic_load_n(&g_log_fd, __ATOMIC_RELAXED);
}

void raw_log_set_fd(int fd) {
  __atomic_store_n(&g_log_fd, fd, __ATOMIC_RELAXED);
  if (fd == g_stuck_fd) g_stuck_fd = -1;
}

namespace {

// stderr as it was at install: a duplicate of it and what file it was. A
// daemon that closes 0-2 and opens its database gets that file as fd 2;
// writing "stderr" there would corrupt it.
bool g_stderr_remembered = false;
int g_stderr_dup = -1;
FdIdentity g_stderr_id = {0, 0, false};
FdIdentity g_stderr_dup_id = {0, 0, false};

}  // namespace

FAULTLINE_START_TEXT void stderr_remember() {
  g_stderr_id = fd_identity(2);
  if (g_stderr_id.valid && g_stderr_dup < 0) {
    g_stderr_dup = fcntl(2, F_DUPFD_CLOEXEC, 10);
    // A duplicate is the same open file: no second fstat.
    if (g_stderr_dup >= 0) g_stderr_dup_id = g_stderr_id;
  }
  g_stderr_remembered = true;
}

int stderr_fd() {
  if (!g_stderr_remembered) return 2;  // before install: the program's own stderr
  if (fd_still(2, g_stderr_id)) return 2;
  if (g_stderr_dup >= 0 && fd_still(g_stderr_dup, g_stderr_dup_id)) return g_stderr_dup;
  return -1;  // stderr is gone (or was never open): write nothing
}

void raw_write_n(int fd, const char* s, unsigned long n) {
  if (fd == 2) fd = stderr_fd();
  if (fd < 0) return;
  int saved = errno;
  while (n > 0) {
    if (fd == g_stuck_fd) break;
    struct pollfd p = {fd, POLLOUT, 0};
    int ready = poll(&p, 1, 1000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      g_stuck_fd = fd;
      break;
    }
    // Ready means room for PIPE_BUF bytes in a pipe, not for all of them.
    ssize_t w = write(fd, s, n < 4096 ? n : 4096);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    s += w;
    n -= static_cast<unsigned long>(w);
  }
  errno = saved;
}

void raw_write(int fd, const char* s) {
  raw_write_n(fd, s, str_len(s));
}

void raw_write_dec(int fd, int64_t v) {
  char b[24];
  raw_write_n(fd, b, fmt_sdec(b, v));
}

void raw_write_hex(int fd, uint64_t v) {
  char b[24];
  raw_write_n(fd, b, fmt_hex(b, v));
}

void raw_log(const char* a, const char* b, const char* c, const char* d) {
  const char* parts[] = {a, b, c, d};
  for (const char* s : parts) {
    if (s) raw_write(raw_log_fd(), s);
  }
}

}  // namespace faultline::core
