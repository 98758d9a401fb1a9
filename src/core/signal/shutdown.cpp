#include "core/signal/shutdown.h"

#include "core/crash_state.h"

namespace faultline::core {
namespace {

uint64_t g_shutdown_mask;
int g_shutdown_reported;

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

bool shutdown_was_reported() {
  return __atomic_load_n(&g_shutdown_reported, __ATOMIC_ACQUIRE) != 0;
}

void shutdown_reported() {
  __atomic_store_n(&g_shutdown_reported, 1, __ATOMIC_RELEASE);
}

}  // namespace faultline::core
