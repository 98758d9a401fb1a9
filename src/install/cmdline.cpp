#include "install/cmdline.h"

#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "core/base/str.h"
#include "core/crash_state.h"

namespace faultline::core {

bool g_argv_from_constructor = false;

void read_cmdline(Config* cfg) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, cfg->argv, sizeof cfg->argv - 1);
  // A full buffer with more to come: cut (the last argument may be cut
  // inside too); the report says so. Only the final NUL left over is not a
  // cut: the buffer ends with one of its own.
  char more[2];
  ssize_t extra = n == static_cast<ssize_t>(sizeof cfg->argv - 1) ? read(fd, more, 2) : 0;
  cfg->argv_truncated = extra > 1 || (extra == 1 && more[0] != '\0');
  close(fd);
  if (n > 0) {
    cfg->argv_len = static_cast<int>(n);
    cfg->argv[n] = '\0';
  }
}

void read_exec_name(Config* cfg) {
  const char* name = reinterpret_cast<const char*>(getauxval(AT_EXECFN));
  if (name) str_copy(cfg->exec_name, sizeof cfg->exec_name, name);
}

}  // namespace faultline::core
