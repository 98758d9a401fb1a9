#include "core/signal/shutdown.h"

#include "core/crash_state.h"

namespace faultline::core {
namespace {

uint64_t g_shutdown_mask;

}  // namespace

void shutdown_set(uint64_t mask) {
  if (g_shutdown_mask != mask) g_shutdown_mask = mask;  // unset: no page touched at start
}

bool is_shutdown(int signo) {
  return signo > 0 && signo < 64 && ((g_shutdown_mask >> signo) & 1);
}

bool shutdown_ignored(int signo) {
  return signo > 0 && signo < 64 && ((g_shutdown_mask >> signo) & 1) &&
         g_crash.previous[signo].sa_handler == SIG_IGN;
}

}  // namespace faultline::core
