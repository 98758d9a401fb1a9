#include "core/base/thread_state.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/start_text.h"
#include "core/base/sys.h"

namespace faultline::core {
namespace {

ThreadState g_states[kMaxThreadStates];

// Which pages of g_states hold an entry ever taken, a bit each: a fork
// child frees the entries on those alone (writing all 1024 entries was 208
// pages in every fork child). A small variable of its own: the link sorts
// the sections of the small ones together, on a page every start-up writes,
// so a fork child reads it without a page fault.
// The last entry's id is at most this many pages past the first page (208
// on x86-64; aarch64's sigjmp_buf makes an entry larger).
constexpr unsigned kTablePages = (sizeof g_states - sizeof(ThreadState)) / 4096 + 2;
uint64_t g_thread_state_pages[(kTablePages + 63) / 64];

// The page of the table that entry `at`'s id is on, counted from the page
// the table starts on (it need not start a page): 0 to 208.
unsigned tid_page(unsigned at) {
  return static_cast<unsigned>((reinterpret_cast<uintptr_t>(&g_states[at].tid) >> 12) -
                               (reinterpret_cast<uintptr_t>(g_states) >> 12));
}
static_assert(kTablePages <= sizeof g_thread_state_pages * 8,
              "a bit for each page of the thread-state table");

int home(pid_t tid) {
  return static_cast<int>(static_cast<unsigned>(tid) % kMaxThreadStates);
}

ThreadState* take(ThreadState* s, pid_t from, pid_t tid) {
  if (from == 0) {
    // Before the entry is taken: a fork between the two must not leave a
    // taken entry on a page the child skips.
    unsigned page = tid_page(static_cast<unsigned>(s - g_states));
    __atomic_fetch_or(&g_thread_state_pages[page / 64], uint64_t{1} << (page % 64),
                      __ATOMIC_SEQ_CST);
  }
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

FAULTLINE_START_TEXT void thread_state_reset_after_fork() {
  // Only the entries on pages that ever held a taken one: the others are
  // free, and reading their pages would fault them in.
  uint64_t pages[sizeof g_thread_state_pages / 8];
  bool any = false;
  for (unsigned w = 0; w < sizeof pages / 8; ++w) {
    pages[w] = __atomic_load_n(&g_thread_state_pages[w], __ATOMIC_ACQUIRE);
    any = any || pages[w] != 0;
  }
  if (!any) return;
  for (unsigned at = 0; at < kMaxThreadStates; ++at) {
    unsigned page = tid_page(at);
    if (!(pages[page / 64] >> (page % 64) & 1)) continue;
    if (__atomic_load_n(&g_states[at].tid, __ATOMIC_ACQUIRE) != 0) {
      __atomic_store_n(&g_states[at].tid, 0, __ATOMIC_RELEASE);
    }
  }
}

}  // namespace faultline::core
