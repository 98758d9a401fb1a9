// Staying in front (FAULTLINE_STAY_IN_FRONT, on by default): a program or library that
// installs its own handler for a signal faultline handles (a runtime that
// handles SIGSEGV and exits without chaining) would otherwise take the crash
// away from faultline. faultline interposes sigaction() and signal(): for its
// signals, the new handler is recorded as the one faultline hands the signal
// on to, and the caller is told about the handler it replaced, as if it were
// installed. Everything else passes straight to libc. It runs in the
// program's context, and that may be a signal handler (sigaction() is
// async-signal-safe; crash handlers call it): this file is checked like the
// crash path (tools/check-signal-safety). What needs the loader is done at
// install, in sigaction_install.cpp.
#include "install/sigaction_hook.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>

#include "core/base/sigaction_real.h"
#include "core/base/sys.h"
#include "core/crash_state.h"
#include "core/signal/chain.h"
#include "core/signal/chain_call.h"
#include "core/signal/handler.h"
#include "core/signal/shutdown.h"
#include "install/dump_signal.h"

namespace faultline::core {

volatile int g_stay_in_front = 0;
volatile int g_stay_in_front_of_shutdown = 0;
volatile uintptr_t g_python_module_start = 0;
volatile uintptr_t g_python_module_end = 0;
volatile int g_dump_signo = 0;
void* volatile g_dump_mark = nullptr;

void dump_signal_taken_over(int signo) {
  // A claim: of two threads setting the signal at once, one unmaps the mark
  // (twice could unmap what the program mapped there in between).
  int expected = signo;
  if (signo <= 0 || !__atomic_compare_exchange_n(&g_dump_signo, &expected, 0, false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return;  // not the dump signal, or already the program's: never put back over it
  }
  void* mark = __atomic_exchange_n(&g_dump_mark, nullptr, __ATOMIC_ACQ_REL);
  if (mark) munmap(mark, 4096);
}

namespace {

SigactionFn resolve() {
  return g_real_sigaction ? g_real_sigaction : sigaction_before_install();
}

// A handler CPython installs itself (faulthandler's): one in the module that
// defines Py_FatalError, whose extent the install found.
bool in_python(const struct sigaction& act) {
  uintptr_t fn = (act.sa_flags & SA_SIGINFO) ? reinterpret_cast<uintptr_t>(act.sa_sigaction)
                                             : reinterpret_cast<uintptr_t>(act.sa_handler);
  return fn >= g_python_module_start && fn < g_python_module_end;
}

void record_later(int signo, const struct sigaction& act) {
  // The signal landing on this thread mid-copy would hand faultline's
  // handler half a struct to chain to: blocked around the copy.
  sigset_t set;
  sigset_t old;
  sigemptyset(&set);
  sigaddset(&set, signo);
  sigprocmask(SIG_BLOCK, &set, &old);
  g_crash.previous[signo] = act;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  uint64_t bit = uint64_t{1} << (signo - 1);
  if (in_python(act)) {
    g_crash.previous_is_python |= bit;
  } else {
    g_crash.previous_is_python &= ~bit;
  }
  if (is_shutdown(signo)) restart_like_program(signo);
}

bool is_faultlines(const struct sigaction& a) {
  return same_function(a, HandlerFn{reinterpret_cast<uintptr_t>(&crash_signal_handler), true});
}

// What the program set: faultline's crash handler, where that is what the
// kernel holds, is none of the program's business.
void program_view(int signo, struct sigaction* old) {
  if (signo > 0 && signo < 65 && is_faultlines(*old)) *old = g_crash.previous[signo];
}

// A child that shares the parent's memory and has not run fork's child
// handlers: vfork() or clone(CLONE_VM), as a shell or CPython's subprocess
// uses before exec. Its resets of the handlers are its own (the kernel gave
// it a copy of the table); recording them would change the parent's
// faultline (step aside for SIGSEGV, unmap the dump mark).
bool in_a_child_sharing_memory() {
  return g_crash.pid != 0 && sys_getpid() != g_crash.pid;
}

// SIG_DFL or SIG_IGN, the way signal() and sigaction() say them.
bool no_function(const struct sigaction& act) {
  return !(act.sa_flags & SA_SIGINFO) && (act.sa_handler == SIG_DFL || act.sa_handler == SIG_IGN);
}

bool ours(int signo) {
  return g_stay_in_front && g_crash.installed && signo > 0 && signo < 65 &&
         g_crash.handled[signo] && (g_stay_in_front_of_shutdown || !is_shutdown(signo));
}

}  // namespace

void restart_like_program(int signo) {
  SigactionFn real = resolve();
  struct sigaction cur;
  if (!real || real(signo, nullptr, &cur) != 0) return;
  if (!is_faultlines(cur)) return;
  int restart = g_crash.previous[signo].sa_flags & SA_RESTART;
  if ((cur.sa_flags & SA_RESTART) == restart) return;
  cur.sa_flags = (cur.sa_flags & ~SA_RESTART) | restart;
  real(signo, &cur, nullptr);
}

}  // namespace faultline::core

using namespace faultline::core;

extern "C" __attribute__((visibility("default"))) int sigaction(int signo,
                                                                const struct sigaction* act,
                                                                struct sigaction* old) {
  SigactionFn real = resolve();
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  if (in_a_child_sharing_memory()) {
    // The child's own table; where it still holds faultline's handler, the
    // program's is the answer (its atfork handlers did not run: a raw
    // clone, _Fork).
    int rc = real(signo, act, old);
    if (rc == 0 && old) program_view(signo, old);
    return rc;
  }
  bool mine = g_crash.installed && signo > 0 && signo < 65 && g_crash.handled[signo];
  if (mine && chain_call_active(signo)) {
    // The program's handler that faultline is running for this signal sets
    // a disposition (re-arms itself, resets to the default before a
    // re-raise): recorded as what faultline hands on to.
    struct sigaction previous = g_crash.previous[signo];
    bool function = act && ((act->sa_flags & SA_SIGINFO)
                                ? act->sa_sigaction != nullptr
                                : act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN);
    if (act && !function) {
      chain_call_defer(signo, *act);
    } else if (act) {
      g_crash.previous[signo] = *act;
    }
    if (old) *old = previous;
    return 0;
  }
  if (!ours(signo)) {
    int rc = real(signo, act, old);
    if (rc == 0 && act) dump_signal_taken_over(signo);
    return rc;
  }
  if (act && no_function(*act) && !(is_shutdown(signo) && act->sa_handler == SIG_DFL)) {
    // signal(sig, SIG_DFL); raise(sig): the program means to die (or to
    // ignore) as it would without us. faultline steps aside for this signal.
    // A shutdown signal's SIG_DFL is recorded (a library restoring the
    // handler it saved): its report comes before the default action. Its
    // SIG_IGN is the kernel's, inherited across exec as without faultline.
    g_crash.handled[signo] = false;
    struct sigaction previous = g_crash.previous[signo];
    int rc = real(signo, act, nullptr);
    if (old) *old = previous;
    return rc;
  }
  // Ours: the caller sees (and replaces) the handler faultline chains to.
  struct sigaction previous = g_crash.previous[signo];
  if (act) record_later(signo, *act);
  if (old) *old = previous;
  return 0;
}

extern "C" __attribute__((visibility("default"))) sighandler_t signal(int signo,
                                                                      sighandler_t handler) {
  struct sigaction sa = {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  if (signo > 0 && signo < 65) sigaddset(&sa.sa_mask, signo);
  sa.sa_flags = SA_RESTART;  // glibc's signal() has BSD semantics
  struct sigaction old = {};
  if (sigaction(signo, &sa, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
