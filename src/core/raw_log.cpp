#include "core/raw_log.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "core/str.h"

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

void raw_write_n(int fd, const char* s, unsigned long n) {
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
