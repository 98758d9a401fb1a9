#include "core/signal/watchdog.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/base/raw_log.h"
#include "core/base/recover.h"
#include "core/base/safe_read.h"
#include "core/base/sigaction_real.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/capture.h"
#include "core/capture/reraise.h"
#include "core/capture/task_files.h"
#include "core/crash_state.h"
#include "core/diagnosis/diagnosis.h"
#include "core/handler_state.h"
#include "core/minidump/minidump_file.h"
#include "core/signal/chain.h"
#include "core/write/report_file.h"

namespace faultline::core {
namespace {

WatchdogState& wd() {
  return g_handler.watchdog;
}

// The watchdog's SIGALRM goes to one thread of faultline's choosing, from a
// POSIX timer (SIGEV_THREAD_ID), never process-directed like alarm(): a
// thread collecting signals with sigwait() would take that one as its own,
// and the watchdog would never fire. Raw system calls: the kernel's timer
// id, no librt. alarm() only where the kernel refuses the timer.
void set_timer(unsigned seconds, pid_t tid) {
  if (wd().timer_id >= 0) {
    syscall(SYS_timer_delete, wd().timer_id);
    wd().timer_id = -1;
  }
  if (seconds == 0) return;
  struct sigevent ev = {};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGALRM;
  ev._sigev_un._tid = tid;
  int id = -1;
  if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &id) != 0) {
    alarm(seconds);
    return;
  }
  struct itimerspec its = {};
  its.it_value.tv_sec = static_cast<time_t>(seconds);
  syscall(SYS_timer_settime, id, 0, &its, nullptr);
  wd().timer_id = id;
}

// The thread the second stage goes to: a held thread standing in, else the
// watching thread (the owner when there is none).
pid_t second_stage_thread() {
  pid_t s = wd().stand_in.load(std::memory_order_acquire);
  return s ? s : wd().watch.load(std::memory_order_acquire);
}

// A thread other than the owner that takes SIGALRM (the owner may block
// every signal: libunwind does, around the loader's lock), never one that
// would take it as its own in sigwait(); the owner when none does.
pid_t pick_watch_thread(pid_t owner) {
  int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return owner;
  pid_t found = 0;
  for_each_dir_entry(dir, [&](const char* name) {
    int64_t tid = 0;
    if (!parse_int(name, &tid) || tid <= 0 || tid == owner) return false;
    if (blocks_signal(static_cast<pid_t>(tid), SIGALRM)) return false;
    found = static_cast<pid_t>(tid);
    return true;
  });
  close(dir);
  return found ? found : owner;
}

// What one capture's watchdog has done so far, cleared when it is armed
// and when it is disarmed (a process that goes on takes later dumps).
void clear_capture_flags() {
  wd().phase_abandoned.store(false, std::memory_order_release);
  wd().jumped.store(false, std::memory_order_release);
  wd().late_cut.store(false, std::memory_order_release);
  wd().fired_ns.store(0, std::memory_order_release);
}

// Leaves the owner's phase for its recovery point, which tells the jump
// from a fault's by `jumped` (watchdog_took_phase).
[[noreturn]] void jump_out_of_phase(ThreadState* ts) {
  wd().jumped.store(true, std::memory_order_release);
  ts->recover_armed = 0;
  siglongjmp(ts->recover, 1);
}

// The current phase's short name ("unwind"), for messages.
const char* current_phase_id() {
  return phase_info(g_handler.phase.load(std::memory_order_acquire)).id;
}

// The watchdog's lines on stderr; none under FAULTLINE_STDERR=0.
void say(const char* a, const char* b, const char* c) {
  if (g_crash.config.write_stderr) raw_log(a, b, c);
}

// The watchdog's report, written by a thread other than the stuck owner
// from what the owner captured so far (which the owner is no longer
// changing: it is blocked).
void write_partial_report() {
  Capture* c = g_crash.capture;
  if (!c) return;
  c->errors.add(
      "watchdog: the capture was stuck; another thread wrote this report with what had been "
      "captured");
  // Stuck writing the minidump: its temporary file goes, and the report says so.
  if (discard_minidump_file(/*owner=*/false)) c->errors.add(phase_info(Phase::kMinidump).text);
  ThreadState* ts = thread_state();
  // The owner may have been stuck before its re-raise phase: the original
  // fault under a handler's re-raise is read here then (a no-op when done).
  if (!ts) {
    recover_reraised_fault(c);
    diagnose(c);
    write_report(*c, true);
  } else if (sigsetjmp(ts->recover, 1) == 0) {
    ts->recover_armed = 1;
    recover_reraised_fault(c);
    diagnose(c);
    write_report(*c, true);
  } else {
    safe_read_end_reads();  // a pipe read the jump abandoned
  }
  if (ts) ts->recover_armed = 0;
}

void watchdog_expired(int, siginfo_t* info, void*) {
  if (!wd().active.load(std::memory_order_acquire)) {
    return;  // a forwarded alarm after the report: nothing to do
  }
  const char* phase = current_phase_id();
  pid_t owner = wd().owner.load(std::memory_order_acquire);
  bool on_owner = sys_gettid() == owner;
  bool forwarded = info && info->si_code == SI_TKILL && info->si_pid == sys_getpid();
  WatchdogStage expected = WatchdogStage::kArmed;
  bool first = wd().stage.compare_exchange_strong(expected, WatchdogStage::kFirst,
                                                  std::memory_order_acq_rel);
  if (first) {
    wd().fired_ns.store(monotonic_ns(), std::memory_order_release);
    set_timer(kWatchdogGraceSeconds, second_stage_thread());
  }
  if (on_owner && (first || forwarded)) {
    ThreadState* ts = thread_state_find();
    if (!wd().phase_abandoned.load(std::memory_order_acquire) && ts && ts->recover_armed) {
      wd().phase_abandoned.store(true, std::memory_order_release);
      say("faultline: watchdog: capture phase \"", phase,
          "\" took too long; writing the report without the rest of it\n");
      jump_out_of_phase(ts);
    }
    return;  // writing the report: let it finish within the grace period
  }
  if (first) {
    // Not the owner: hand the first stage to it.
    wd().forwarding.fetch_add(1, std::memory_order_acq_rel);
    if (wd().active.load(std::memory_order_acquire)) {
      syscall(SYS_tgkill, sys_getpid(), owner, SIGALRM);
    }
    wd().forwarding.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  // Not once a stand-in writes (its own bounding alarm may land here): the
  // owner would go on to the diagnosis beside it, in the same arena.
  if (on_owner && !wd().late_cut.load(std::memory_order_acquire) &&
      g_handler.writer.load(std::memory_order_acquire) == Writer::kNobody) {
    // Past the grace period inside one of the phases that still run after
    // the first stage (the symbols read files: a cold cache, a slow network
    // filesystem): leave it and write the report, with one more grace
    // period for that. Without this, an owner the alarm lands on (a
    // single-threaded process) would give up with no report at all.
    ThreadState* ts = thread_state_find();
    Phase p = g_handler.phase.load(std::memory_order_acquire);
    if (ts && ts->recover_armed && phase_runs_late(p)) {
      wd().late_cut.store(true, std::memory_order_release);
      say("faultline: watchdog: capture phase \"", phase,
          "\" ran past the grace period; writing the report without the rest of it\n");
      set_timer(kWatchdogGraceSeconds, sys_gettid());
      jump_out_of_phase(ts);
    }
  }
  wd().stage.store(WatchdogStage::kSecond, std::memory_order_release);
  Writer nobody = Writer::kNobody;
  if (!on_owner && g_handler.writer.compare_exchange_strong(nobody, Writer::kWatchdog,
                                                            std::memory_order_acq_rel)) {
    say("faultline: watchdog: the crash handler is stuck in phase \"", phase,
        "\"; writing what was captured from another thread\n");
    set_timer(kWatchdogGraceSeconds, sys_gettid());  // bound this thread's writing too
    write_partial_report();
  } else {
    say("faultline: watchdog: the crash handler ran too long; giving up in phase \"", phase,
        "\"\n");
  }
  int signo = g_handler.signo.load(std::memory_order_acquire);
  die_with_default(signo ? signo : SIGABRT);
}

// The program's alarm or interval timer, less the time the report took (one
// that came due meanwhile fires at once), so a process that goes on (a
// handler behind faultline recovered) keeps its timeouts and ticks.
void restore_program_timer() {
  struct itimerval t = wd().program_timer;
  wd().program_timer = {};
  if (t.it_value.tv_sec == 0 && t.it_value.tv_usec == 0) return;
  int64_t left_us = static_cast<int64_t>(t.it_value.tv_sec) * 1000000 + t.it_value.tv_usec -
                    static_cast<int64_t>((monotonic_ns() - wd().armed_ns) / 1000);
  if (left_us < 1) left_us = 1;
  t.it_value.tv_sec = static_cast<time_t>(left_us / 1000000);
  t.it_value.tv_usec = static_cast<suseconds_t>(left_us % 1000000);
  syscall(SYS_setitimer, ITIMER_REAL, &t, nullptr);
}

}  // namespace

void arm_watchdog(int seconds) {
  if (seconds <= 0) return;
  struct sigaction sa = {};
  sa.sa_sigaction = watchdog_expired;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  real_sigaction(SIGALRM, &sa, &wd().old_alarm);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  wd().owner.store(sys_gettid(), std::memory_order_release);
  wd().stage.store(WatchdogStage::kArmed, std::memory_order_release);
  wd().active.store(true, std::memory_order_release);
  clear_capture_flags();
  wd().stand_in.store(0, std::memory_order_release);
  wd().seconds = seconds;
  // The program's own alarm waits, as alarm() replacing it made it wait.
  struct itimerval none = {};
  wd().program_timer = {};
  syscall(SYS_setitimer, ITIMER_REAL, &none, &wd().program_timer);
  wd().armed_ns = monotonic_ns();
  wd().watch.store(pick_watch_thread(sys_gettid()), std::memory_order_release);
  set_timer(static_cast<unsigned>(seconds), wd().watch.load(std::memory_order_acquire));
}

void disarm_watchdog(int seconds) {
  if (seconds <= 0) return;
  wd().active.store(false, std::memory_order_release);
  set_timer(0, 0);
  alarm(0);  // where the kernel refused the timer
  wd().stand_in.store(0, std::memory_order_release);
  // A forwarded or already fired alarm must not reach the program's own
  // SIGALRM action (often the default: terminate) once it is back: block
  // it, wait out a forward in flight, and take any pending one.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  for (int spins = 0; wd().forwarding.load(std::memory_order_acquire) && spins < 1000; ++spins) {
    struct timespec ts = {0, 100 * 1000};
    nanosleep(&ts, nullptr);
  }
  struct timespec zero = {0, 0};
  while (syscall(SYS_rt_sigtimedwait, &set, nullptr, &zero, sizeof(uint64_t)) == SIGALRM) {
  }
  real_sigaction(SIGALRM, &wd().old_alarm, nullptr);
  restore_program_timer();
  // The process may go on (a chained handler that recovers): a later live
  // dump, which arms no watchdog, must not find this one fired and skip
  // every phase.
  wd().stage.store(WatchdogStage::kArmed, std::memory_order_release);
  clear_capture_flags();
}

}  // namespace faultline::core
