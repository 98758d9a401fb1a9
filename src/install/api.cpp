// The public C API of install time (faultline/faultline.h), beside
// faultline_install (install.cpp): taking the handlers away, asking what is
// installed, and a live dump on demand. Normal program context, never a
// signal handler (the C API safe there is core/signal/signal_safe_api.cpp).
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/base/sigaction_real.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/capture/thread_signal.h"
#include "core/capture/threads.h"
#include "core/crash_state.h"
#include "core/handler_state.h"
#include "core/signal/handler.h"
#include "core/terminate_record.h"
#include "core/write/report_file.h"
#include "core/write/report_writer.h"
#include "faultline/faultline.h"
#include "install/dump_helper.h"
#include "install/dump_later.h"
#include "install/dump_signal.h"
#include "install/sigaction_hook.h"
#include "install/terminate.h"
#include "install/thread_stacks.h"

#ifndef FAULTLINE_VERSION
#define FAULTLINE_VERSION "0.0.0"
#endif

using namespace faultline::core;

extern "C" {

void faultline_uninstall(void) {
  g_stay_in_front = 0;
  g_stay_in_front_of_shutdown = 0;
  dump_later_cancel();
  install_dump_signal(0);
  threads_uninstall();
  set_thread_altstacks(false);
  uninstall_terminate_handler();
  for (int s = 1; s < 64; ++s) {
    if (g_crash.handled[s]) {
      real_sigaction(s, &g_crash.previous[s], nullptr);
      g_crash.handled[s] = false;
    }
  }
  g_crash.installed = false;
}

int faultline_installed(void) {
  return g_crash.installed ? 1 : 0;
}

const char* faultline_version(void) {
  return FAULTLINE_VERSION;
}

namespace {

// A live dump made on this thread by a call, not a signal: nothing is sent
// (a thread blocking the dump signal would only leave it pending), and the
// unwind starts from here.
void dump_here() {
  siginfo_t si = {};
  si.si_signo = SIGUSR2;
  si.si_code = SI_USER;
  si.si_pid = g_crash.pid;
  ucontext_t uc;
  getcontext(&uc);
  dump_in_process(SIGUSR2, &si, &uc);
}

// Whether this thread blocks `signo` (faultline's timed-dump watchdog
// blocks every signal): sent to itself, it would only stay pending.
bool blocked_here(int signo) {
  sigset_t mask;
  return pthread_sigmask(SIG_BLOCK, nullptr, &mask) == 0 && sigismember(&mask, signo) == 1;
}

// faultline_dump_now, with cancellation off.
int dump_now_uncancelled() {
  // By ptrace from a helper where it can be: no thread is interrupted.
  char why[sizeof g_dump_by_signal_because];
  bool by_helper = dump_by_helper(why, sizeof why);
  if (by_helper) return 0;
  str_copy(g_dump_by_signal_because, sizeof g_dump_by_signal_because, why);
  int before = dumps_written();
  if (int signo = installed_dump_signal(); signo > 0 && !blocked_here(signo)) {
    // Delivered to this thread before tgkill returns; its handler takes the
    // signal request, not the helper again.
    g_handler.dump_by_signal_tid.store(sys_gettid(), std::memory_order_release);
    syscall(SYS_tgkill, g_crash.pid, sys_gettid(), signo);
    g_handler.dump_by_signal_tid.store(0, std::memory_order_release);
  } else {
    dump_here();
  }
  g_dump_by_signal_because[0] = '\0';
  return dumps_written() > before ? 0 : -EIO;
}

}  // namespace

int faultline_dump_now(void) {
  if (!g_crash.installed) return -ENOTCONN;
  int saved_errno = errno;
  // Not cancelled half-way (the helper waits in cancellation points: a
  // cancel there would leave it running and every later dump waiting).
  int cancel_state = PTHREAD_CANCEL_ENABLE;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  int rc = dump_now_uncancelled();
  pthread_setcancelstate(cancel_state, nullptr);
  errno = saved_errno;
  return rc;
}

int faultline_dump_after_thread(unsigned int milliseconds, int exit_after, int wait_tid) {
  if (!g_crash.installed) return -ENOTCONN;
  if (wait_tid < 0) return -EINVAL;
  return dump_later_arm(milliseconds, exit_after != 0, wait_tid);
}

int faultline_dump_after(unsigned int milliseconds, int exit_after) {
  return faultline_dump_after_thread(milliseconds, exit_after, 0);
}

void faultline_cancel_dump_after(void) {
  dump_later_cancel();
}

int faultline_exception_report(const char* type, const char* message, const char* frames,
                               const char* text) {
  if (!g_crash.installed) return -ENOTCONN;
  PythonExceptionInfo& e = g_py_exception;
  int idle = 0;
  if (!__atomic_compare_exchange_n(&e.set, &idle, 2, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return -EBUSY;
  }
  auto copy = [](char* to, size_t size, const char* from, int* truncated) {
    size_t n = str_copy(to, size, from ? from : "");
    if (truncated) *truncated = from && n < str_len(from);
  };
  copy(e.type, sizeof e.type, type, nullptr);
  copy(e.message, sizeof e.message, message, &e.message_truncated);
  copy(e.frames, sizeof e.frames, frames, &e.frames_truncated);
  copy(e.text, sizeof e.text, text, &e.text_truncated);
  e.tid = static_cast<int>(sys_gettid());
  __atomic_store_n(&e.set, 1, __ATOMIC_RELEASE);  // dump_work takes it as kException
  // Called, not signalled: this thread may block the dump signal.
  int before = dumps_written();
  DumpSignalHeld held;  // a real one meanwhile: written after this one
  dump_here();
  __atomic_store_n(&e.set, 0, __ATOMIC_RELEASE);
  return dumps_written() > before ? 0 : -EIO;
}

size_t faultline_last_report(char* buf, size_t size) {
  if (!buf || size == 0) return 0;
  return str_copy(buf, size, last_report_path());
}

}  // extern "C"
