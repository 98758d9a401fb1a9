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
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

namespace faultline::cli {

namespace {

// The threads attached now, for the exit handler (a signal handler reads
// them: a fixed array of atomics, no allocation).
constexpr int kMaxAttached = 1 << 15;
volatile sig_atomic_t g_attached[kMaxAttached];
volatile sig_atomic_t g_nattached = 0;

void remember(pid_t tid) {
  for (int i = 0; i < g_nattached; ++i) {
    if (g_attached[i] == 0) {
      g_attached[i] = tid;
      return;
    }
  }
  if (g_nattached < kMaxAttached) {
    g_attached[g_nattached] = tid;
    g_nattached = g_nattached + 1;
  }
}

void forget(pid_t tid) {
  for (int i = 0; i < g_nattached; ++i) {
    if (g_attached[i] == tid) g_attached[i] = 0;
  }
}

// Detaches what can be detached (threads in a ptrace stop) and ends the
// process by the signal; the kernel lets any other attached thread go when
// its tracer exits.
void on_exit_signal(int sig) {
  for (int i = 0; i < g_nattached; ++i) {
    if (g_attached[i] > 0) ptrace(PTRACE_DETACH, static_cast<pid_t>(g_attached[i]), 0, 0);
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

// A thread that does not stop within this time (uninterruptible sleep: a
// hung file system) is left out of the dump.
constexpr int kStopWaitSeconds = 5;

void on_alarm(int) {}

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

// Whether thread tid of pid has a signal pending that it does not block
// (then an EINTR it got may be that signal's, and stays).
bool signal_waiting(pid_t pid, pid_t tid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/status", pid, tid));
  std::string line;
  unsigned long long pending = 0, blocked = 0;
  while (std::getline(in, line)) {
    const char* v = line.c_str() + line.find(':') + 1;
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
      pending |= std::strtoull(v, nullptr, 16);
    else if (line.rfind("SigBlk:", 0) == 0)
      blocked = std::strtoull(v, nullptr, 16);
  }
  return (pending & ~blocked) != 0;
}

// Linux makes a few waits fail with EINTR when their thread is stopped and
// goes on, with no signal at all (signal(7): epoll_wait, semop/semtimedop,
// sigtimedwait, a socket's recv/send/accept under SO_RCVTIMEO/SO_SNDTIMEO),
// and a ptrace stop is such a stop. Where the thread stopped at the return
// of one of these with EINTR and no signal is waiting for it, the call is
// made again, as the kernel restarts the other calls a stop interrupts: its
// ip back on the `syscall` instruction, the call's number where its result
// was (its arguments are still in their registers). A call with a timeout
// starts it again.
void restart_stop_eintr(pid_t pid, pid_t tid) {
#if defined(__x86_64__)
  user_regs_struct r{};
  struct iovec io = {&r, sizeof r};
  // A 32-bit process's registers are smaller: not this layout.
  if (ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, &io) != 0 || io.iov_len != sizeof r) return;
  if (static_cast<long long>(r.rax) != -EINTR) return;
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
      return;
  }
  if (signal_waiting(pid, tid)) return;
  // Only over a `syscall` instruction (0f 05) right before ip.
  errno = 0;
  long word = ptrace(PTRACE_PEEKTEXT, tid, r.rip - 2, 0);
  if (errno != 0 || (word & 0xffff) != 0x050f) return;
  r.rax = r.orig_rax;
  r.rip -= 2;
  ptrace(PTRACE_SETREGSET, tid, NT_PRSTATUS, &io);
#else
  (void)pid;
  (void)tid;
#endif
}

}  // namespace

void ThreadStopper::install_exit_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_exit_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

bool ThreadStopper::wait_stop(StoppedThread* t) {
  // Blocks in waitpid (no polling: a stop is seen as soon as it happens),
  // bounded by a timer whose SIGALRM (caught without SA_RESTART) ends the
  // wait with EINTR.
  struct sigaction sa {
  }, old{};
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, &old);
  struct itimerval timer {};
  timer.it_value.tv_sec = kStopWaitSeconds;
  setitimer(ITIMER_REAL, &timer, nullptr);
  bool stopped = false;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(t->tid, &st, __WALL);
    if (r < 0) break;  // EINTR: the timer (stuck); ECHILD: gone, or no longer ours
    if (WIFEXITED(st) || WIFSIGNALED(st)) break;
    if (WIFSTOPPED(st)) {
      // PTRACE_EVENT_STOP: our interrupt (or a group stop). Otherwise the
      // thread stopped on its way to take a signal: it takes it when we
      // let it go.
      if ((st >> 16) != PTRACE_EVENT_STOP)
        t->pending_signal = WSTOPSIG(st);
      else
        restart_stop_eintr(pid_, t->tid);
      t->stopped = stopped = true;
      break;
    }
  }
  timer = {};
  setitimer(ITIMER_REAL, &timer, nullptr);
  sigaction(SIGALRM, &old, nullptr);
  return stopped;
}

int ThreadStopper::stop_all(std::string* why) {
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
      threads_.push_back(StoppedThread{tid});
      if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) threads_.back().tid = -tid;  // exiting
    }
    if (threads_.size() == first_new) break;
    for (size_t i = first_new; i < threads_.size(); ++i) {
      StoppedThread& t = threads_[i];
      if (t.tid < 0) continue;
      if (!wait_stop(&t) && !t.stopped) {
        // Exited (the kernel detached it) or stuck: not in a stop, so a
        // detach would fail; the kernel lets it go when we exit.
        forget(t.tid);
      }
    }
  }
  for (StoppedThread& t : threads_) t.tid = t.tid < 0 ? -t.tid : t.tid;
  for (const StoppedThread& t : threads_)
    if (t.stopped) return 0;
  *why = fmt::format("no thread of process {} could be stopped", pid_);
  detach_all();
  return ESRCH;
}

void ThreadStopper::detach_all() {
  for (StoppedThread& t : threads_) {
    if (t.stopped) {
      // ESRCH: it died meanwhile (the whole process was killed).
      ptrace(PTRACE_DETACH, t.tid, 0, t.pending_signal);
      t.stopped = false;
    }
    forget(t.tid);
  }
  threads_.clear();
}

}  // namespace faultline::cli
