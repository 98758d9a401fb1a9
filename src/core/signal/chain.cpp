#include "core/signal/chain.h"

#include <unistd.h>

#include "core/base/sigaction_real.h"
#include "core/base/signals.h"
#include "core/base/start_text.h"
#include "core/base/sys.h"
#include "core/crash_state.h"

namespace faultline::core {

void die_with_default(int signo) {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  real_sigaction(signo, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  syscall(SYS_tgkill, sys_getpid(), sys_gettid(), signo);
  // SIGABRT/SIGSEGV default actions terminate; if the signal is somehow
  // ignored or blocked, leave with the shell's convention.
  _exit(128 + signo);
}

// A core file shows the crash and not our handler: a hardware fault recurs
// by itself when the faulting instruction re-executes on return. A signal
// that would not recur (sent by a process: abort, kill; or a trap, whose pc
// is already past the int3) is re-sent to this thread while blocked here,
// and is delivered when the return restores the interrupted context's mask.
bool chain(int signo, siginfo_t* info) {
  struct sigaction prev = g_crash.previous[signo];
  // From here on the signal is the program's again (the sigaction
  // interposer lets its calls through).
  g_crash.handled[signo] = false;
  if (prev.sa_handler == SIG_IGN) {
    // A synchronous fatal signal cannot be ignored: fall to the default.
    prev.sa_handler = SIG_DFL;
    prev.sa_flags = 0;
  }
  real_sigaction(signo, &prev, nullptr);
  bool recurs = !signal_sent_by_process(info->si_code) &&
                (signo == SIGSEGV || signo == SIGBUS || signo == SIGILL || signo == SIGFPE);
  if (!recurs) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    send_again(signo, info, /*to_process=*/false);
  }
  return prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN;
}

// With the original siginfo, so that the program's SA_SIGINFO handler sees
// the real sender (si_pid, si_code) and not this thread's tgkill. The kernel
// takes a sender's si_code (SI_USER, SI_KERNEL) only from the thread the
// signal is for: to the process, that is the main thread alone; elsewhere
// it goes as kill() (still a separate pending signal, from our own pid).
void send_again(int signo, const siginfo_t* info, bool to_process) {
  pid_t pid = sys_getpid();
  long rc = -1;
  if (info) {
    siginfo_t si = *info;
    si.si_signo = signo;
    rc = to_process ? syscall(SYS_rt_sigqueueinfo, pid, signo, &si)
                    : syscall(SYS_rt_tgsigqueueinfo, pid, sys_gettid(), signo, &si);
  }
  if (rc == 0) return;
  if (to_process) {
    syscall(SYS_kill, pid, signo);
  } else {
    syscall(SYS_tgkill, pid, sys_gettid(), signo);
  }
}

FAULTLINE_START_TEXT HandlerFn handler_fn(const struct sigaction& a) {
  bool siginfo = (a.sa_flags & SA_SIGINFO) != 0;
  return {siginfo ? reinterpret_cast<uintptr_t>(a.sa_sigaction)
                  : reinterpret_cast<uintptr_t>(a.sa_handler),
          siginfo};
}

bool same_function(const struct sigaction& a, const HandlerFn& b) {
  HandlerFn fa = handler_fn(a);
  return fa.siginfo == b.siginfo && fa.fn == b.fn;
}

bool same_function(const struct sigaction& a, const struct sigaction& b) {
  return same_function(a, handler_fn(b));
}

}  // namespace faultline::core
