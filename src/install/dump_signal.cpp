#include "install/dump_signal.h"

#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/base/sigaction_real.h"
#include "core/signal/handler.h"

namespace faultline::core {
namespace {

struct sigaction g_previous_dump;

// The mark `faultline dump` looks for (g_dump_mark, dump_signal.h).
void publish_marker(int signo) {
  if (g_dump_mark) munmap(g_dump_mark, 4096);
  g_dump_mark = nullptr;
  if (signo <= 0) return;
  char name[48];
  snprintf(name, sizeof name, "faultline dump signal %d", signo);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return;
  void* page =
      ftruncate(fd, 4096) == 0 ? mmap(nullptr, 4096, PROT_NONE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (page != MAP_FAILED) g_dump_mark = page;
}

}  // namespace

void install_dump_signal(int signo) {
  if (g_dump_signo == signo) return;
  if (g_dump_signo > 0) real_sigaction(g_dump_signo, &g_previous_dump, nullptr);
  g_dump_signo = 0;
  if (signo <= 0) {
    publish_marker(0);
    return;
  }
  struct sigaction sa = {};
  sa.sa_sigaction = dump_signal_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  if (real_sigaction(signo, &sa, &g_previous_dump) == 0) g_dump_signo = signo;
  publish_marker(g_dump_signo);
}

int installed_dump_signal() {
  return g_dump_signo;
}

}  // namespace faultline::core
