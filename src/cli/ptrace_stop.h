// Stops every thread of another process with ptrace, and always lets them go.
//
// PTRACE_SEIZE attaches without a signal; PTRACE_INTERRUPT stops a thread in
// a ptrace stop, which the kernel ends without the program seeing anything:
// a system call it interrupted (poll, epoll_wait, nanosleep, sigwait) is
// restarted when the thread goes on, as if it had never stopped. A signal
// handler, by contrast, makes poll, epoll_wait and nanosleep fail with EINTR.
//
// A thread that does not stop (in vfork, an uninterruptible wait) is left
// out after one deadline shared by all the threads attached in a round (1 s),
// and let go at detach_all if it has stopped by then.
//
// Never crashes on a hostile or exiting target: a thread that exits while it
// is attached is dropped (ESRCH), threads born meanwhile are attached in a
// later round, until a round finds no new one (then no thread is left running
// to make another).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace faultline::cli {

struct StoppedThread {
  pid_t tid = 0;
  bool stopped = false;    // in a ptrace stop: registers and stack readable
  int pending_signal = 0;  // stopped on its way to take this signal: given back at detach
};

class ThreadStopper {
 public:
  explicit ThreadStopper(pid_t pid) : pid_(pid) {}
  ~ThreadStopper() { detach_all(); }
  ThreadStopper(const ThreadStopper&) = delete;
  ThreadStopper& operator=(const ThreadStopper&) = delete;

  // Attaches to and stops every thread. 0 when at least one thread is
  // stopped; else the errno of the refusal (EPERM: ptrace is not allowed:
  // Yama's ptrace_scope, no CAP_SYS_PTRACE, another user's process) or
  // ESRCH (the process is gone). *why says what failed.
  int stop_all(std::string* why);
  const std::vector<StoppedThread>& threads() const { return threads_; }
  // Lets every thread go on (idempotent; the destructor calls it).
  void detach_all();

  // SIGINT, SIGTERM, SIGHUP and SIGQUIT of this process detach the threads
  // before it ends. Install once, before stop_all.
  static void install_exit_handlers();

 private:
  bool wait_stop(StoppedThread* t);
  pid_t pid_;
  std::vector<StoppedThread> threads_;
};

}  // namespace faultline::cli
