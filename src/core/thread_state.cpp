#include "core/thread_state.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/sys.h"

namespace faultline::core {
namespace {

ThreadState g_states[kMaxThreadStates];

int home(pid_t tid) {
  return static_cast<int>(static_cast<unsigned>(tid) % kMaxThreadStates);
}

ThreadState* take(ThreadState* s, pid_t from, pid_t tid) {
  if (!__atomic_compare_exchange_n(&s->tid, &from, tid, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_RELAXED)) {
    // Taken for this very thread by a signal handler that interrupted
    // this claim: the same entry, not a second one.
    return from == tid ? s : nullptr;
  }
  s->recover_armed = 0;
  s->secondary_uc = nullptr;
  s->call.sp = 0;
  s->returned.signo = 0;
  return s;
}

}  // namespace

bool thread_is_gone(pid_t tid) {
  return syscall(SYS_tgkill, sys_getpid(), tid, 0) != 0 && errno == ESRCH;
}

ThreadState* thread_state_find() {
  return thread_state_find(sys_gettid());
}

ThreadState* thread_state_find(pid_t tid) {
  for (int i = 0, at = home(tid); i < kMaxThreadStates; ++i, at = (at + 1) % kMaxThreadStates) {
    pid_t owner = __atomic_load_n(&g_states[at].tid, __ATOMIC_ACQUIRE);
    if (owner == tid) return &g_states[at];
    // Never used: this thread took the first free entry from its home on
    // (entries are never freed, only reclaimed when none is free), so its
    // entry is not further on. Stopping here keeps a lookup of a thread
    // without an entry (every sigaction of the program) from reading all
    // 1024 entries, ~600 KiB of them.
    if (owner == 0) return nullptr;
  }
  return nullptr;
}

ThreadState* thread_state() {
  return thread_state(sys_gettid());
}

ThreadState* thread_state(pid_t tid) {
  if (ThreadState* s = thread_state_find(tid)) return s;
  int saved_errno = errno;
  ThreadState* got = nullptr;
  // A free entry near the thread's home, else one of an exited thread.
  for (int pass = 0; pass < 2 && !got; ++pass) {
    for (int i = 0, at = home(tid); i < kMaxThreadStates && !got;
         ++i, at = (at + 1) % kMaxThreadStates) {
      pid_t owner = __atomic_load_n(&g_states[at].tid, __ATOMIC_ACQUIRE);
      if (owner == 0 || (pass == 1 && thread_is_gone(owner))) {
        got = take(&g_states[at], owner, tid);
      }
    }
  }
  errno = saved_errno;
  return got;
}

void thread_state_reset_after_fork() {
  for (ThreadState& s : g_states) __atomic_store_n(&s.tid, 0, __ATOMIC_RELEASE);
}

}  // namespace faultline::core
