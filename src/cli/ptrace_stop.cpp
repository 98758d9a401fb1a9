// Stopping every thread of another process with ptrace (see ptrace_stop.h).
#include "cli/ptrace_stop.h"

#include <dirent.h>
#include <elf.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "cli/proc_status.h"

namespace faultline::cli {

namespace {

// The threads attached now, and beside each the signal it stopped on its
// way to take (0: none), for the exit handler (a signal handler reads them:
// fixed arrays of atomics, no allocation). The handler runs in the tracer
// thread (the others block the exit signals), so it sees each entry either
// before or after the tracer's update, never half of it.
constexpr int kMaxAttached = 1 << 15;
volatile sig_atomic_t g_attached[kMaxAttached];
volatile sig_atomic_t g_pending[kMaxAttached];
volatile sig_atomic_t g_nattached = 0;

void remember(pid_t tid) {
  for (int i = 0; i < g_nattached; ++i) {
    if (g_attached[i] == 0) {
      g_pending[i] = 0;
      g_attached[i] = tid;
      return;
    }
  }
  if (g_nattached < kMaxAttached) {
    g_pending[g_nattached] = 0;
    g_attached[g_nattached] = tid;
    g_nattached = g_nattached + 1;
  }
}

// Records the signal thread tid stopped on its way to take, for the exit
// handler to give back. (A handler that runs between the waitpid that
// reported the stop and this store still detaches with none: a window of a
// few instructions.)
void remember_pending(pid_t tid, int sig) {
  for (int i = 0; i < g_nattached; ++i) {
    if (g_attached[i] == tid) g_pending[i] = sig;
  }
}

void forget(pid_t tid) {
  for (int i = 0; i < g_nattached; ++i) {
    if (g_attached[i] == tid) g_attached[i] = 0;
  }
}

// Detaches what can be detached (threads in a ptrace stop), giving each the
// signal it had stopped to take (a detach with none drops it), and ends the
// process by the signal; the kernel lets any other attached thread go when
// its tracer exits.
void on_exit_signal(int sig) {
  for (int i = 0; i < g_nattached; ++i) {
    if (g_attached[i] > 0)
      ptrace(PTRACE_DETACH, static_cast<pid_t>(g_attached[i]), 0, static_cast<long>(g_pending[i]));
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// The thread ids of process pid (empty when it is gone).
std::vector<pid_t> list_tasks(pid_t pid) {
  std::vector<pid_t> out;
  std::string path = fmt::format("/proc/{}/task", pid);
  DIR* d = opendir(path.c_str());
  if (!d) return out;
  while (struct dirent* e = readdir(d)) {
    char* end = nullptr;
    long tid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && tid > 0) out.push_back(static_cast<pid_t>(tid));
  }
  closedir(d);
  return out;
}

// The time the threads attached in one round have, together, to stop: one
// that has not stopped by then (a thread in vfork, an uninterruptible sleep
// on a hung file system) is left out of the dump. One deadline for all, so
// that several such threads do not hold the others stopped one after
// another.
constexpr int kStopWaitMs = 1000;
// After the deadline the timer fires again this often, so that a waitpid
// entered just after it fired is still ended.
constexpr int kStopRepeatMs = 10;

volatile sig_atomic_t g_expired = 0;

long long monotonic_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

void on_alarm(int) {
  g_expired = 1;
}

// Whether thread tid of pid is gone or on its way out (a zombie, or dead):
// the kernel refuses to attach to an exiting thread with EPERM, which is
// then no refusal of ptrace.
bool exiting(pid_t pid, pid_t tid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/stat", pid, tid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  char state = stat[close + 2];
  return state == 'Z' || state == 'X' || state == 'x';
}

// Linux makes a few waits fail with EINTR directly when their thread is
// stopped, with no signal at all (signal(7): epoll_wait, semop/semtimedop,
// sigtimedwait, a socket's recv/send/accept under SO_RCVTIMEO/SO_SNDTIMEO),
// and a ptrace stop is such a stop. Where the thread stopped at the return
// of one of these with EINTR, its result becomes -ERESTARTNOHAND, which lets
// the kernel decide when the thread goes on, as for the calls it restarts
// itself: a signal with a handler (one that came while the thread was held
// included) ends the call with EINTR, as it would have without the dump (each
// of these fails with EINTR on a handled signal, SA_RESTART or not); no
// signal, or an ignored one (queued only because the thread is traced),
// makes the call again (one with a timeout starts it again). Only these
// calls: another that fails with EINTR may have done its work (close).
// Whether it made the change.
bool restart_stop_eintr(pid_t tid) {
#if defined(__x86_64__)
  constexpr long long kErestartNohand = 514;  // the kernel's, not in the uapi headers
  user_regs_struct r{};
  struct iovec io = {&r, sizeof r};
  // A 32-bit process's registers are smaller: not this layout.
  if (ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, &io) != 0 || io.iov_len != sizeof r) return false;
  if (static_cast<long long>(r.rax) != -EINTR) return false;
  // orig_rax: the call the thread is in (-1: none, e.g. after a signal
  // handler's return restored an old EINTR).
  switch (static_cast<long long>(r.orig_rax)) {
    case 232:  // epoll_wait
    case 281:  // epoll_pwait
    case 441:  // epoll_pwait2
    case 65:   // semop
    case 220:  // semtimedop
    case 128:  // rt_sigtimedwait
    case 43:   // accept
    case 288:  // accept4
    case 44:   // sendto
    case 45:   // recvfrom
    case 46:   // sendmsg
    case 47:   // recvmsg
      break;
    default:
      return false;
  }
  r.rax = static_cast<unsigned long long>(-kErestartNohand);
  return ptrace(PTRACE_SETREGSET, tid, NT_PRSTATUS, &io) == 0;
#else
  (void)tid;
  return false;
#endif
}

// Whether the program ignores signal sig (SIG_IGN, or the default action of
// SIGCHLD, SIGURG, SIGWINCH or SIGCONT), from thread tid's /proc status.
// Linux drops such a signal when it is sent, unless the thread is traced:
// then it is queued, wakes the thread's wait, and the thread stops on its
// way to take it, a stop that only the tracer caused.
bool ignored(pid_t tid, int sig) {
  std::string status = fmt::format("/proc/{}/status", tid);
  std::optional<unsigned long long> ign = status_mask(status, "SigIgn");
  std::optional<unsigned long long> caught = status_mask(status, "SigCgt");
  if (!ign || !caught || sig < 1 || sig > 64) return false;
  if (has_signal(*ign, sig)) return true;
  bool default_ignore = sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT;
  return default_ignore && !has_signal(*caught, sig);
}

// Takes a stop that waitpid reported for thread t (status st).
void take_stop(StoppedThread* t, int st) {
  // PTRACE_EVENT_STOP: our interrupt (SIGTRAP) or a group stop (the stop
  // signal: the job was stopped, and an EINTR there is the stop's, which
  // Linux gives after SIGCONT without us). Otherwise the thread stopped on
  // its way to take a signal: it takes it when we let it go.
  if ((st >> 16) != PTRACE_EVENT_STOP) {
    t->pending_signal = WSTOPSIG(st);
    remember_pending(t->tid, t->pending_signal);
    // A signal the program ignores woke the wait only because the thread
    // is traced: given back at detach it is dropped, and the call goes on
    // as it would have. (One it handles or that stops the job ends the
    // call with EINTR, with or without the dump: left as it is.)
    if (ignored(t->tid, t->pending_signal)) t->eintr_restarted = restart_stop_eintr(t->tid);
  } else if (WSTOPSIG(st) == SIGTRAP) {
    t->eintr_restarted = restart_stop_eintr(t->tid);
  }
  t->stopped = true;
}

// Arms (ms > 0) or disarms (0) the stop deadline.
void arm_deadline(int ms, struct sigaction* old) {
  struct itimerval timer {};
  if (ms > 0) {
    g_expired = 0;
    struct sigaction sa {};
    sa.sa_handler = on_alarm;  // no SA_RESTART: ends a waitpid with EINTR
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, old);
    timer.it_value.tv_sec = ms / 1000;
    timer.it_value.tv_usec = (ms % 1000) * 1000;
    timer.it_interval.tv_usec = kStopRepeatMs * 1000;
    setitimer(ITIMER_REAL, &timer, nullptr);
  } else {
    setitimer(ITIMER_REAL, &timer, nullptr);
    sigaction(SIGALRM, old, nullptr);
  }
}

}  // namespace

void ThreadStopper::install_exit_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_exit_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

bool ThreadStopper::wait_stop(StoppedThread* t) {
  // Blocks in waitpid (no polling: a stop is seen as soon as it happens)
  // until the deadline; after it, only looks.
  for (;;) {
    int st = 0;
    pid_t r = waitpid(t->tid, &st, __WALL | (g_expired ? WNOHANG : 0));
    if (r == 0) return false;  // past the deadline and not stopped (stuck)
    if (r < 0) {
      if (errno == EINTR) continue;  // the deadline: one more look
      t->done = true;                // ECHILD: gone, or no longer ours
      return false;
    }
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      t->done = true;
      return false;
    }
    if (WIFSTOPPED(st)) {
      take_stop(t, st);
      return true;
    }
  }
}

int ThreadStopper::stop_all(std::string* why) {
  started_ms_ = monotonic_ms();
  std::set<pid_t> seen;
  // Each round attaches the threads born since the last; the stopped ones
  // cannot make more, so a round that finds none new ends it.
  for (int round = 0; round < 1000; ++round) {
    std::vector<pid_t> tids = list_tasks(pid_);
    if (tids.empty() && threads_.empty()) {
      *why = fmt::format("no process {}", pid_);
      return ESRCH;
    }
    size_t first_new = threads_.size();
    for (pid_t tid : tids) {
      if (!seen.insert(tid).second) continue;
      if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
        int e = errno;
        if (e == ESRCH || (e == EPERM && exiting(pid_, tid))) continue;  // exited meanwhile
        *why = fmt::format("ptrace(PTRACE_SEIZE) of thread {} of process {}: {}", tid, pid_,
                           std::strerror(e));
        detach_all();
        return e;
      }
      remember(tid);
      if (seized_hook_) seized_hook_(tid);
      threads_.push_back(StoppedThread{tid});
      if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) threads_.back().tid = -tid;  // exiting
    }
    if (threads_.size() == first_new) break;
    // One deadline for the round's threads together (a stuck thread is new
    // in one round only).
    struct sigaction old_alarm {};
    arm_deadline(kStopWaitMs, &old_alarm);
    for (size_t i = first_new; i < threads_.size(); ++i) {
      // Not stopped: exited (the kernel detached it) or stuck; detach_all
      // looks at it once more.
      if (threads_[i].tid > 0) wait_stop(&threads_[i]);
    }
    arm_deadline(0, &old_alarm);
  }
  for (StoppedThread& t : threads_) t.tid = t.tid < 0 ? -t.tid : t.tid;
  for (const StoppedThread& t : threads_)
    if (t.stopped) return 0;
  *why = fmt::format("no thread of process {} could be stopped", pid_);
  detach_all();
  return ESRCH;
}

void ThreadStopper::let_go(StoppedThread* t) {
  if (!t->stopped) return;
  // ESRCH: it died meanwhile (the whole process was killed).
  ptrace(PTRACE_DETACH, t->tid, 0, t->pending_signal);
  t->stopped = false;
  t->done = true;
  forget(t->tid);
}

void ThreadStopper::let_stopped_go() {
  for (StoppedThread& t : threads_) let_go(&t);
}

StoppedThread* ThreadStopper::wait_late(int deadline_ms) {
  auto waiting = [this] {
    for (const StoppedThread& t : threads_)
      if (!t.stopped && !t.done && t.tid > 0) return true;
    return false;
  };
  if (!waiting()) return nullptr;
  long long left = started_ms_ + deadline_ms - monotonic_ms();
  struct sigaction old_alarm {};
  if (left > 0)
    arm_deadline(static_cast<int>(left), &old_alarm);
  else
    g_expired = 1;
  StoppedThread* got = nullptr;
  while (!got && waiting()) {
    // Any of them: they are the only children this process has (the
    // others, stopped, were let go).
    int st = 0;
    pid_t r = waitpid(-1, &st, __WALL | (g_expired ? WNOHANG : 0));
    if (r == 0) break;  // past the deadline
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (StoppedThread& t : threads_) {
      if (t.tid != r || t.stopped || t.done) continue;
      if (WIFSTOPPED(st)) {
        take_stop(&t, st);
        t.late = true;
        got = &t;
      } else if (WIFEXITED(st) || WIFSIGNALED(st)) {
        t.done = true;
        forget(t.tid);
      }
    }
  }
  if (left > 0) arm_deadline(0, &old_alarm);
  return got;
}

void ThreadStopper::detach_all() {
  for (StoppedThread& t : threads_) {
    int st = 0;
    // A thread that stopped after the deadline (its vfork child exited) is
    // let go too; one still stuck stays attached, with our interrupt pending,
    // until the thread that attached it ends (the kernel then lets it go
    // and cancels the interrupt).
    if (!t.stopped && !t.done && t.tid > 0 && waitpid(t.tid, &st, __WALL | WNOHANG) == t.tid &&
        WIFSTOPPED(st))
      take_stop(&t, st);
    let_go(&t);
    forget(t.tid);
  }
  threads_.clear();
}

}  // namespace faultline::cli
