// Stops every thread of another process with ptrace, and always lets them go.
//
// PTRACE_SEIZE attaches without a signal; PTRACE_INTERRUPT stops a thread in
// a ptrace stop, which the kernel ends without the program seeing anything:
// a system call it interrupted (poll, epoll_wait, nanosleep, sigwait) is
// restarted when the thread goes on, as if it had never stopped. A signal
// handler, by contrast, makes poll, epoll_wait and nanosleep fail with EINTR.
//
// A thread that does not stop (in vfork, an uninterruptible wait) is left
// behind after one deadline shared by all the threads attached in a round
// (1 s): the others are captured and let go without it, and it is waited
// for on its own (wait_late) until a bound, captured and let go as soon as
// it stops. The stopper must live in a thread of its own that ends when the
// dump has read everything: the kernel then lets go of any thread still
// attached and cancels the stop it was asked for, so no thread of the job
// stops after the capture (it stayed stopped until the CLI exited).
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
  bool late = false;       // stopped only after the first deadline (wait_late)
  bool done = false;       // let go, or gone: nothing more to wait for
  int pending_signal = 0;  // stopped on its way to take this signal: given back at detach
  // Its call's EINTR, which only the stop caused, was made a restart
  // (-ERESTARTNOHAND in its result register): the register read now is not
  // the one the thread had, which was -EINTR.
  bool eintr_restarted = false;
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
  // Lets the stopped threads go on; those that have not stopped stay
  // attached for wait_late.
  void let_stopped_go();
  // Waits until one of the threads that had not stopped stops, at most
  // until `deadline_ms` after stop_all began; that one, stopped (detach it
  // with let_go), or nullptr when none stopped in time or none is left.
  StoppedThread* wait_late(int deadline_ms);
  void let_go(StoppedThread* t);

  // SIGINT, SIGTERM, SIGHUP and SIGQUIT of this process detach the threads
  // before it ends, each with the signal it had stopped to take. Install
  // once, before stop_all.
  static void install_exit_handlers();

  // For tests: called with each thread id just after it is attached and
  // before it is asked to stop (a signal sent then makes the thread's first
  // stop a signal's).
  void set_seized_hook(void (*hook)(pid_t tid)) { seized_hook_ = hook; }

 private:
  bool wait_stop(StoppedThread* t);
  pid_t pid_;
  std::vector<StoppedThread> threads_;
  long long started_ms_ = 0;  // CLOCK_MONOTONIC, when stop_all began
  void (*seized_hook_)(pid_t) = nullptr;
};

}  // namespace faultline::cli
