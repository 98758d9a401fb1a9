// Per-thread state of the crash path without thread-local storage.
//
// libfaultline.so must load late (dlopen, ctypes.CDLL after start-up): a
// library loaded then gets little or no static TLS from glibc, and dynamic
// TLS is allocated with malloc on a thread's first touch, which a signal
// handler must never do. So per-thread state lives in fixed tables keyed by
// the kernel thread id, claimed with a compare-and-swap (no locks, no
// allocation: async-signal-safe), and an entry whose thread is gone is reused.
#pragma once

#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucontext.h>

#include "core/base/arch.h"

namespace faultline::core {

// The program's handler that faultline is calling on this thread as a
// function (core/signal/chain_call.cpp): a signal that handler raises (abort) is
// reported as the fault it was called for.
struct ChainCall {
  volatile uintptr_t sp;  // where the caller keeps the cookie; 0: no call
  uint64_t cookie;
  int signo;
  siginfo_t info;  // the fault handed to it
  void* uc;
  volatile int reported;
  // A reset to the default (or to ignore) that handler asked for through
  // faultline's sigaction(), applied once faultline has decided: until then
  // other threads' faults still reach the handler.
  volatile int has_deferred;
  struct sigaction deferred;
  // An SA_NODEFER handler runs with its signal unblocked, as the kernel runs
  // it; a re-raise of that signal by the handler is held here instead of
  // pending in the kernel (kept until faultline has decided).
  volatile int nodefer;
  volatile int reraised;
  siginfo_t reraise_info;
};

// A fault the program's handler returned from with nothing changed (the
// instruction is retried): the same fault again, right after, was not
// recovered.
struct ReturnedFault {
  int signo;  // 0: none
  int reported;
  uintptr_t addr;
  uint64_t regs[kFaultRegCount];  // the general registers (arch.h)
};

// Recovery from a fault inside faultline's own handlers (see recover.h), the
// context of a thread that crashed after the first crash, and the chaining
// to the program's handler.
struct ThreadState {
  pid_t tid;  // 0: free (atomic)
  volatile int recover_armed;
  const ucontext_t* secondary_uc;
  sigjmp_buf recover;
  ChainCall call;
  ReturnedFault returned;
};

constexpr int kMaxThreadStates = 1024;

// This thread's entry, found or claimed (a free entry, else one of a thread
// that no longer exists). nullptr only when every entry belongs to a live
// thread: the caller then runs without a recovery point.
ThreadState* thread_state();
// The same for a thread that knows its id (saves a system call).
ThreadState* thread_state(pid_t self);
// This thread's entry if it has one (never claims).
ThreadState* thread_state_find();
ThreadState* thread_state_find(pid_t self);
// In a fork child: only the forking thread exists, under a new id.
void thread_state_reset_after_fork();

// thread_pointer(), pthread_self_address(): core/base/arch.h.

// True when thread tid of this process has exited (tgkill with signal 0).
bool thread_is_gone(pid_t tid);

}  // namespace faultline::core
