#include "core/capture/thread_signal.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/sigaction_real.h"
#include "core/base/start_text.h"
#include "core/base/sys.h"
#include "core/base/thread_state.h"
#include "core/capture/threads.h"
#include "core/unwind/unwind.h"

namespace faultline::core {
namespace {

int g_signo = 0;
// The handler signals that are not a capture's go on to: the one installed
// before ours, or the program's own that a capture found in our place. Two
// slots, one published: a thread chaining while the owner replaces it
// reads a whole one.
// alignas(8), its natural alignment: the compiler would give an array this
// size 32, which sorts it among the big tables (-fdata-sections and the
// link's --sort-section=alignment) and costs a page fault at every start;
// with 8 it shares the page of the small variables install writes anyway.
alignas(8) struct sigaction g_previous_slots[2];
int g_previous_at = 0;  // atomic: the published slot
const struct sigaction& previous() {
  return g_previous_slots[__atomic_load_n(&g_previous_at, __ATOMIC_ACQUIRE) & 1];
}

// Threads inside chain_previous now: its id, its thread pointer and its
// stack address at entry. The same thread entering again deeper on the same
// stack is a program's handler handing the signal back to ours (a loop);
// otherwise it is a thread that jumped out of an earlier call (a siglongjmp
// from the program's handler) and takes its slot over. Not ThreadState:
// claiming one here could race the crash handler's own claim.
struct Chaining {
  pid_t tid;  // 0: free (atomic)
  uintptr_t tp, sp;
};
constexpr int kChainingSlots = 256;
Chaining g_chaining[kChainingSlots];
// Whether a slot was ever taken: a fork child resets the slots only then
// (two pages written in every fork child otherwise).
bool g_chaining_used = false;

// False when this thread is already inside chain_previous (the loop).
// *mine: the slot to free afterwards (none when every slot is taken), held
// under this thread's id, *self.
__attribute__((noinline)) bool enter_chaining(Chaining** mine, pid_t* self_out) {
  const pid_t self = sys_gettid();
  *self_out = self;
  const uintptr_t tp = thread_pointer();
  char here;
  const uintptr_t sp = reinterpret_cast<uintptr_t>(&here);
  for (Chaining& e : g_chaining) {
    if (__atomic_load_n(&e.tid, __ATOMIC_ACQUIRE) != self) continue;
    // Deeper by more than a signal frame and less than 64 KiB (one round
    // of the loop: a signal frame and the program's handler), on the same
    // stack: called again from inside.
    stack_t ss;
    bool same_stack = true;
    if (sigaltstack(nullptr, &ss) == 0)
      same_stack = on_signal_stack(ss, sp) == on_signal_stack(ss, e.sp);
    if (e.tp == tp && same_stack && sp + 512 < e.sp && e.sp - sp < (64u << 10)) return false;
    *mine = &e;
    break;
  }
  // A free slot, else one of a thread that exited (it jumped out and left).
  for (int pass = 0; pass < 2 && !*mine; ++pass) {
    for (int i = 0; !*mine && i < kChainingSlots; ++i) {
      pid_t owner = __atomic_load_n(&g_chaining[i].tid, __ATOMIC_ACQUIRE);
      if (owner != 0 && (pass == 0 || !thread_is_gone(owner))) continue;
      // Before the slot is taken: a fork between the two must not leave it
      // taken in a child that skips the slots.
      __atomic_store_n(&g_chaining_used, true, __ATOMIC_SEQ_CST);
      if (__atomic_compare_exchange_n(&g_chaining[i].tid, &owner, self, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED)) {
        *mine = &g_chaining[i];
      }
    }
  }
  // None left (more threads in the program's handler at once than slots):
  // unguarded, as before the guard, rather than a signal the program waits
  // for never reaching it.
  if (!*mine) return true;
  (*mine)->tp = tp;
  (*mine)->sp = sp;
  return true;
}

}  // namespace

void chain_previous(int signo, siginfo_t* info, void* uc) {
  const struct sigaction prev = previous();  // a copy: a capture may replace it
  const bool sig = prev.sa_flags & SA_SIGINFO;
  if (sig ? !prev.sa_sigaction : prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
    return;
  }
  // A program's handler that itself hands the signal on to the handler it
  // replaced (faulthandler.register(chain=True)), ours, would come back
  // here for good: once per thread at a time.
  Chaining* mine = nullptr;
  pid_t self = 0;
  if (!enter_chaining(&mine, &self)) return;
  // The program's handler runs with the mask the kernel would have given it
  // (ours blocks every asynchronous signal): the mask at delivery, its
  // sa_mask, and the signal itself unless SA_NODEFER.
  sigset_t mask = static_cast<ucontext_t*>(uc)->uc_sigmask, old;
  for (int s = 1; s < NSIG; ++s) {
    if (sigismember(&prev.sa_mask, s) == 1) sigaddset(&mask, s);
  }
  if (!(prev.sa_flags & SA_NODEFER)) sigaddset(&mask, signo);
  bool masked = sigprocmask(SIG_SETMASK, &mask, &old) == 0;
  if (sig) {
    prev.sa_sigaction(signo, info, uc);
  } else {
    prev.sa_handler(signo);
  }
  if (masked) sigprocmask(SIG_SETMASK, &old, nullptr);
  // Only if still ours: an inner call on another stack may have taken the
  // slot over and freed it, and another thread claimed it since.
  if (mine) {
    __atomic_compare_exchange_n(&mine->tid, &self, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  }
}

namespace {

// Our action for the thread-dump signal.
struct sigaction our_action() {
  struct sigaction sa = {};
  sa.sa_sigaction = thread_signal_handler;
  // Every asynchronous signal waits while a thread answers: a program's
  // handler that jumps away (a SIGALRM timeout's siglongjmp) would leave
  // this thread counted in flight for good, and every later live dump would
  // wait for it. The fault signals stay open (one blocked while it is
  // raised kills the process without a report); the kernel restores the
  // thread's mask when the handler returns.
  sigfillset(&sa.sa_mask);
  static const int kSync[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};
  for (int sync : kSync) sigdelset(&sa.sa_mask, sync);
  // SA_RESTART: in a live dump the process goes on, and its interrupted
  // system calls must not fail with EINTR because of us.
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  return sa;
}

// Whether action is faultline's thread-dump handler.
bool is_ours(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) && action.sa_sigaction == thread_signal_handler;
}

}  // namespace

int thread_signal_number() {
  return g_signo;
}

// Before a capture asks: the program may have installed its own handler
// for the thread-dump signal since (Python's signal.signal, a profiler), and
// then no thread would answer. Ours goes back, and the program's becomes the
// one its own uses of the signal are handed on to.
void reclaim_thread_signal(CaptureErrors* errors) {
  struct sigaction cur;
  if (g_signo <= 0 || real_sigaction(g_signo, nullptr, &cur) != 0) return;
  if (is_ours(cur)) return;
  struct sigaction sa = our_action(), replaced;
  // SA_RESTART as the program chose it for its signal (Python leaves it
  // off: its handlers run when a blocking call returns EINTR).
  sa.sa_flags = (sa.sa_flags & ~SA_RESTART) | (cur.sa_flags & SA_RESTART);
  if (real_sigaction(g_signo, &sa, &replaced) != 0) return;
  // What was replaced, not what was read: a thread may have installed
  // another handler in between (or put ours back for a moment, as a
  // handler that hands the signal on does: then nothing changes).
  if (is_ours(replaced)) return;
  int next = (__atomic_load_n(&g_previous_at, __ATOMIC_ACQUIRE) + 1) & 1;
  g_previous_slots[next] = replaced;
  __atomic_store_n(&g_previous_at, next, __ATOMIC_RELEASE);
  errors->add(
      "threads: the program had replaced faultline's handler of the thread-dump signal "
      "(FAULTLINE_THREAD_SIGNAL); put back, the program's handler still gets its own signals");
}

FAULTLINE_START_TEXT void threads_init(int signo) {
  threads_set_pid(sys_getpid());
  if (signo == g_signo || (signo <= 0 && g_signo <= 0)) return;
  threads_uninstall();  // a second install that asks for another signal, or none
  if (signo <= 0) return;
  struct sigaction sa = our_action();
  __atomic_store_n(&g_previous_at, 0, __ATOMIC_RELEASE);
  if (real_sigaction(signo, &sa, &g_previous_slots[0]) == 0) g_signo = signo;
}

FAULTLINE_START_TEXT void threads_uninstall() {
  // Only if ours is still the handler: never over one the program set since.
  struct sigaction cur;
  if (g_signo > 0 && real_sigaction(g_signo, nullptr, &cur) == 0 && is_ours(cur)) {
    real_sigaction(g_signo, &previous(), nullptr);
  }
  g_signo = 0;
}

FAULTLINE_START_TEXT void thread_signal_reset_after_fork() {
  if (!__atomic_load_n(&g_chaining_used, __ATOMIC_RELAXED)) return;
  for (Chaining& e : g_chaining) {
    if (__atomic_load_n(&e.tid, __ATOMIC_RELAXED) != 0)
      __atomic_store_n(&e.tid, 0, __ATOMIC_RELAXED);
  }
}

}  // namespace faultline::core
