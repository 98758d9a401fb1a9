#include "install/dump_later.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "faultline/faultline.h"

namespace faultline::core {
namespace {

// How long an exit waits for the named thread (faulthandler's watchdog,
// which writes its text in microseconds once its own deadline passes) to
// end after the report: 10 s covers a loaded machine; past it the process
// ends all the same, as asked.
constexpr int kWaitThreadMs = 10 * 1000;

// One watchdog per process, its state under g_lock. Plain statics: a fork
// child gets fresh ones (dump_later_after_fork).
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_wake;      // the watchdog: the deadline changed
pthread_cond_t g_finished;  // cancel: a dump being written ended
bool g_started = false;     // a watchdog thread runs (and will see g_armed)
bool g_armed = false;
bool g_dumping = false;      // the watchdog is writing a dump now
struct timespec g_deadline;  // CLOCK_MONOTONIC
bool g_exit_after = false;
int g_wait_tid = 0;

void init_conds() {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g_wake, &attr);
  pthread_condattr_destroy(&attr);
  pthread_cond_init(&g_finished, nullptr);
}

// Until thread `tid` of this process has ended, or kWaitThreadMs.
void wait_thread_gone(int tid) {
  pid_t pid = getpid();
  for (int waited = 0; waited < kWaitThreadMs; ++waited) {
    if (syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH) return;
    struct timespec ms = {0, 1000 * 1000};
    nanosleep(&ms, nullptr);
  }
}

// The watchdog: waits for the deadline (which arm and cancel may move
// meanwhile); at it, the dump, outside the lock (a cancel waits for it on
// g_finished). Once nothing is armed (after the dump, after a cancel) it
// ends, so an unarmed process keeps no thread of ours (unshare(2) of a user
// namespace needs a single-threaded process): it clears g_started under the
// lock it leaves by, and the next arm starts a new one.
void* watchdog(void*) {
  pthread_setname_np(pthread_self(), "faultline-later");
  pthread_mutex_lock(&g_lock);
  while (g_armed) {
    if (pthread_cond_timedwait(&g_wake, &g_lock, &g_deadline) != ETIMEDOUT) continue;
    if (!g_armed) break;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec < g_deadline.tv_sec ||
        (now.tv_sec == g_deadline.tv_sec && now.tv_nsec < g_deadline.tv_nsec)) {
      continue;  // re-armed later while this wait timed out
    }
    g_armed = false;
    g_dumping = true;
    bool exit_after = g_exit_after;
    int wait_tid = g_wait_tid;
    pthread_mutex_unlock(&g_lock);
    faultline_dump_now();
    if (exit_after) {
      if (wait_tid > 0) wait_thread_gone(wait_tid);
      _exit(1);  // faulthandler's exit=True: no atexit handlers, no flush
    }
    pthread_mutex_lock(&g_lock);
    g_dumping = false;
    pthread_cond_broadcast(&g_finished);
  }
  g_started = false;
  pthread_mutex_unlock(&g_lock);
  return nullptr;
}

// Starts the watchdog with every signal blocked from its first
// instruction: no signal of the program's is ever handled on it (its
// dump's own request, on the signal path, is a call, api.cpp).
int start_watchdog() {
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &attr, watchdog, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  return -rc;
}

}  // namespace

int dump_later_arm(uint64_t delay_ms, bool exit_after, int wait_tid) {
  if (delay_ms == 0) return -EINVAL;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_conds);
  pthread_mutex_lock(&g_lock);
  int rc = 0;
  if (!g_started) {
    rc = start_watchdog();
    g_started = rc == 0;
  }
  if (rc == 0) {
    clock_gettime(CLOCK_MONOTONIC, &g_deadline);
    g_deadline.tv_sec += static_cast<time_t>(delay_ms / 1000);
    g_deadline.tv_nsec += static_cast<long>(delay_ms % 1000) * 1000 * 1000;
    if (g_deadline.tv_nsec >= 1000 * 1000 * 1000) {
      g_deadline.tv_sec += 1;
      g_deadline.tv_nsec -= 1000 * 1000 * 1000;
    }
    g_exit_after = exit_after;
    g_wait_tid = wait_tid;
    g_armed = true;
    pthread_cond_signal(&g_wake);
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}

void dump_later_cancel() {
  pthread_mutex_lock(&g_lock);
  if (g_started) {
    g_armed = false;
    pthread_cond_signal(&g_wake);
    while (g_dumping) pthread_cond_wait(&g_finished, &g_lock);
  }
  pthread_mutex_unlock(&g_lock);
}

void dump_later_after_fork() {
  // The parent's lock may have been held by another thread at the fork:
  // the child starts from fresh ones.
  g_lock = PTHREAD_MUTEX_INITIALIZER;
  init_conds();
  g_started = false;
  g_armed = false;
  g_dumping = false;
}

}  // namespace faultline::core
