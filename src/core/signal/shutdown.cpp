#include "core/signal/shutdown.h"

#include "core/base/sigaction_real.h"
#include "core/crash_state.h"

namespace faultline::core {
namespace {

uint64_t g_shutdown_mask;
uint64_t g_shutdown_rank_only;
int g_shutdown_reported;

}  // namespace

void shutdown_set(uint64_t mask, uint64_t rank_only) {
  // Unset: no page touched at start.
  if (g_shutdown_mask != mask) g_shutdown_mask = mask;
  if (g_shutdown_rank_only != rank_only) g_shutdown_rank_only = rank_only;
}

uint64_t shutdown_after_fork() {
  uint64_t give_back = g_shutdown_mask & g_shutdown_rank_only;
  if (give_back == 0) return 0;
  for (int s = 1; s < 64; ++s) {
    // The program's handler, mask and flags, as the program set them; the
    // interposer passes this signal straight through from now on.
    if (((give_back >> s) & 1) && g_crash.handled[s] &&
        real_sigaction(s, &g_crash.previous[s], nullptr) == 0) {
      g_crash.handled[s] = false;
    }
  }
  g_shutdown_mask &= ~give_back;
  return give_back;
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
