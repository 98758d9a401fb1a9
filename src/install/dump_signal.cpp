#include "install/dump_signal.h"

#include <signal.h>
#include <time.h>

#include "core/base/sigaction_real.h"
#include "core/signal/handler.h"

namespace faultline::core {
namespace {

timer_t g_dump_timer;
bool g_dump_timer_armed = false;
struct sigaction g_previous_dump;
int g_dump_signo = 0;

}  // namespace

void install_dump_signal(int signo) {
  if (g_dump_signo == signo) return;
  if (g_dump_signo > 0) real_sigaction(g_dump_signo, &g_previous_dump, nullptr);
  g_dump_signo = 0;
  if (signo <= 0) return;
  struct sigaction sa = {};
  sa.sa_sigaction = dump_signal_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  if (real_sigaction(signo, &sa, &g_previous_dump) == 0) g_dump_signo = signo;
}

void arm_dump_timer(int seconds, int signo) {
  if (g_dump_timer_armed) {
    timer_delete(g_dump_timer);
    g_dump_timer_armed = false;
  }
  if (seconds <= 0 || signo <= 0) return;
  struct sigevent ev = {};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = signo;
  if (timer_create(CLOCK_MONOTONIC, &ev, &g_dump_timer) != 0) return;
  struct itimerspec its = {};
  its.it_value.tv_sec = seconds;
  g_dump_timer_armed = timer_settime(g_dump_timer, 0, &its, nullptr) == 0;
}

int installed_dump_signal() {
  return g_dump_signo;
}

}  // namespace faultline::core
