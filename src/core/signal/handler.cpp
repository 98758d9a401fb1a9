// The fatal-signal handler. Runs on the alternate signal stack, possibly with
// the heap corrupt and locks held by the thread that died. Everything it
// touches was prepared at install (src/install/install.cpp); doc/design.md
// has the rules.
//
// Order: claim the crash (one CAS on the owner word), arm the watchdog,
// capture into the arena (on the crash stack), write the report file under a
// temporary name and rename it, write the torchelastic error file, print the
// stderr summary, then hand the signal on. The file comes before stderr:
// stderr may be a dead or full pipe.
#include "core/signal/handler.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/base/arch.h"
#include "core/base/raw_log.h"
#include "core/base/recover.h"
#include "core/base/sigaction_real.h"
#include "core/base/signals.h"
#include "core/base/start_text.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/capture.h"
#include "core/capture/capture_all.h"
#include "core/capture/threads.h"
#include "core/crash_state.h"
#include "core/handler_state.h"
#include "core/signal/chain.h"
#include "core/signal/chain_call.h"
#include "core/signal/crash_stack.h"
#include "core/signal/helper_dump.h"
#include "core/signal/shutdown.h"
#include "core/signal/watchdog.h"
#include "core/terminate_record.h"
#include "core/write/crash_limits.h"
#include "core/write/report_file.h"
#include "core/write/report_writer.h"
#include "core/write/stderr_summary.h"
#include "core/write/torchelastic.h"

namespace faultline::core {

// The crash path's shared state.
// Page-aligned: install writes the first page (small fields and
// the default signals' previous[]) and the starts of Config's strings,
// typically 3 pages in all (a first write of a page is a fault, ~10 us
// here; see CrashState).
alignas(4096) CrashState g_crash;
static_assert(offsetof(CrashState, previous) + 12 * sizeof(struct sigaction) <= 4096,
              "the default signals' previous[] entries (4 to 11) belong on the first page");
SigactionFn g_real_sigaction = nullptr;  // set at install (src/install/sigaction_hook.cpp)
TerminateInfo g_terminate;           // filled by the terminate handler (src/install/terminate.cpp)
PythonExceptionInfo g_py_exception;  // filled by faultline_exception_report (src/install/api.cpp)
FAULTLINE_CONSTINIT HandlerState g_handler;
// Set while a capture phase runs: a fault inside it jumps back to the
// phase runner, which records the phase as failed and goes on with the next one.

// Crashes of other threads that arrived while the report was being made.
SecondaryCrash g_secondary[kMaxSecondary];
volatile int g_nsecondary = 0;

namespace {

// Set before the first claim of a crash or a dump. Until then g_handler is
// as constant-initialized, and a fork child leaves its page alone: writing
// it was a page fault in every fork child.
bool g_claim_tried = false;

struct OwnerWork {
  int signo;
  siginfo_t* info;
  void* ucv;
  bool written;
};

void set_phase(Phase p) {
  g_handler.phase.store(p, std::memory_order_release);
}

void crash_work(void* arg) {
  OwnerWork* w = static_cast<OwnerWork*>(arg);
  const Config& cfg = g_crash.config;
  // Threads still unwinding for an earlier live dump write into the arena.
  threads_quiet(500);
  Capture* c = begin_capture();
  if (!c) {
    raw_log("faultline: no crash arena; no report\n");
    return;
  }
  // The process is about to end: threads that answer stay parked in
  // faultline's handler until it does (threads.h).
  threads_hold_answers();
  // abort() from our terminate handler (on this thread): an uncaught C++
  // exception.
  bool terminating = w->signo == SIGABRT && __atomic_load_n(&g_terminate.set, __ATOMIC_ACQUIRE) &&
                     g_terminate.tid == sys_gettid();
  c->terminate = terminating ? &g_terminate : nullptr;
  c->secondary = g_secondary;
  c->nsecondary = &g_nsecondary;
  CaptureKind kind = terminating             ? CaptureKind::kTerminate
                     : is_shutdown(w->signo) ? CaptureKind::kShutdown
                                             : CaptureKind::kCrash;
  if (kind == CaptureKind::kShutdown && handler_fn(g_crash.previous[w->signo]).fn > 1) {
    // The program's own handler takes the signal next and may go on (a
    // checkpoint, then exit): the other threads must not have been stopped.
    c->own_thread_only =
        "not interrupted: the program's own handler takes the signal next and the process may go "
        "on";
  }
  capture_all(c, kind, w->signo, w->info, w->ucv);
  // The file first: stderr may be a dead or full pipe.
  Writer nobody = Writer::kNobody;
  if (!g_handler.writer.compare_exchange_strong(nobody, Writer::kOwner,
                                                std::memory_order_acq_rel)) {
    // The watchdog's stand-in is writing the report, and ends the process
    // when it is done (its own alarm bounds it). Returning would disarm the
    // watchdog and hand the signal on: the process would end under the
    // stand-in's write. Wait for it, bounded.
    for (int i = 0; i < (kWatchdogGraceSeconds * 2 + 2) * 100; ++i) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
    return;
  }
  // Over the same-crash limit: counted, not written (announce_suppressed).
  const bool suppressed = same_crash_suppressed(c);
  if (!suppressed) {
    w->written = write_report(*c, /*announce=*/false);
  }
  // torchrun's agent reads this file to name the root cause (which a rank
  // it stopped is not).
  set_phase(Phase::kTorchelastic);
  if (kind != CaptureKind::kShutdown) {
    write_torchelastic_error_file(*c, cfg.dir,
                                  w->written ? path_basename(last_report_path()) : nullptr);
  }
  // stderr last: it may be a pipe nobody reads (writes to it are bounded).
  if (cfg.write_stderr) {
    set_phase(Phase::kStderrSummary);
    write_stderr_summary(*c, cfg);
  }
  // FAULTLINE_STDERR=0: nothing on stderr at all, not even the fallback copy.
  if (cfg.write_stderr && suppressed) announce_suppressed(*c);
  if (cfg.write_stderr && !suppressed) announce_report(*c, w->written);
  // Last: listing a big (or network) directory may be slow, and the
  // torchelastic file and stderr must not wait for it.
  if (w->written) enforce_dir_limit(path_basename(last_report_path()));
}

void dump_work(void* arg) {
  OwnerWork* w = static_cast<OwnerWork*>(arg);
  // A thread still unwinding itself for the previous dump writes into the
  // arena: wait for it, or skip this dump.
  if (!threads_quiet(2000)) {
    if (g_crash.config.write_stderr) {
      raw_log("faultline: live dump skipped: a thread is still unwinding for the previous one\n");
    }
    return;
  }
  Capture* c = begin_capture();
  if (!c) return;
  c->secondary = g_secondary;
  c->nsecondary = &g_nsecondary;
  // Asked for by faultline_exception_report on this thread: an uncaught
  // Python exception, taken as a live dump.
  // 1 only: 2 is its fields still being copied (a SIGUSR2 dump landing on
  // that thread meanwhile is a plain dump, not a half-filled exception).
  bool exception = __atomic_load_n(&g_py_exception.set, __ATOMIC_ACQUIRE) == 1 &&
                   g_py_exception.tid == sys_gettid();
  c->py_exception = exception ? &g_py_exception : nullptr;
  // The process goes on after an exception report: the other threads are
  // not sent the stack request (it would cut their system calls short).
  if (exception)
    c->own_thread_only = "not interrupted: the process goes on after an exception report";
  capture_all(c, exception ? CaptureKind::kException : CaptureKind::kDump, w->signo, w->info,
              w->ucv);
  w->written = write_report(*c, /*announce=*/false);
  if (g_crash.config.write_stderr) announce_report(*c, w->written);
}

void ignore_sigpipe(struct sigaction* old) {
  struct sigaction ign = {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  real_sigaction(SIGPIPE, &ign, old);
}

// Waits (bounded) for the crash owner to finish its report.
void wait_for_report(int gen, int limit_ms) {
  for (int waited = 0;
       waited < limit_ms && g_handler.report_gen.load(std::memory_order_acquire) == gen;
       waited += 5) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

// Records a crash of this thread while another thread owns the crash.
void record_secondary(pid_t self, int signo, siginfo_t* info, void* ucv) {
  int slot = __atomic_fetch_add(&g_nsecondary, 1, __ATOMIC_ACQ_REL);
  if (slot < kMaxSecondary) {
    SecondaryCrash& sc = g_secondary[slot];
    sc.tid = self;
    sc.signo = signo;
    sc.code = info->si_code;
    sc.addr = reinterpret_cast<uintptr_t>(info->si_addr);
    sc.pc = ucv ? uc_pc(*static_cast<ucontext_t*>(ucv)) : 0;
    __atomic_store_n(&sc.valid, 1, __ATOMIC_RELEASE);
  }
  note_secondary_crash(static_cast<ucontext_t*>(ucv));
}

// Signals no fault raises (a terminal's ^C comes from the kernel too): on
// the thread writing a report they are a signal to keep, never a fault of
// faultline's own.
bool never_a_fault(int signo) {
  return is_shutdown(signo) || signo == SIGINT || signo == SIGTERM || signo == SIGHUP ||
         signo == SIGQUIT;
}

// A signal that reached the thread writing a report: kept (the first one),
// and sent again once the report is done (deliver_deferred).
void defer(int signo, const siginfo_t* info) {
  int none = 0;
  if (!g_handler.deferred_signal.compare_exchange_strong(none, -1, std::memory_order_acq_rel)) {
    return;
  }
  g_handler.deferred_info = *info;
  g_handler.deferred_signal.store(signo, std::memory_order_release);
}

// Sends the kept signal again, blocked until this handler returns: the
// program then sees it after the first one, as without faultline. The same
// signal as `pending` (already pending on this thread) goes to the process,
// where it stays pending apart from the first instead of merging with it.
//
// Taken out of the slot (take_deferred) while this thread still owns the
// report: once ownership is released another thread may become the owner
// and keep a signal of its own there.
struct Deferred {
  int signo;
  siginfo_t info;
};
Deferred take_deferred() {
  Deferred d = {g_handler.deferred_signal.exchange(0, std::memory_order_acq_rel), {}};
  if (d.signo > 0) d.info = g_handler.deferred_info;
  return d;
}
void deliver_deferred(Deferred d, int pending) {
  if (d.signo <= 0) return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, d.signo);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  send_again(d.signo, &d.info, d.signo == pending && d.info.si_code != SI_TKILL);
}

}  // namespace

void crash_signal_handler(int signo, siginfo_t* info, void* ucv) {
  int saved_errno = errno;
  if (sys_getpid() != g_crash.pid) {
    // A vfork child (it shares our memory, and fork handlers did not run)
    // or a raw clone: touch nothing, die as without faultline.
    die_with_default(signo);
  }
  if (shutdown_ignored(signo)) {
    errno = saved_errno;  // the program ignores it: so does faultline
    return;
  }
  if (is_shutdown(signo) && shutdown_was_reported()) {
    errno = saved_errno;  // one shutdown report: this one is the program's
    chain(signo, info);
    return;
  }
  pid_t self = sys_gettid();
  bool from_kernel = !never_a_fault(signo) && !signal_sent_by_process(info->si_code);
  ThreadState* state = from_kernel ? thread_state_find() : nullptr;
  if (state && state->recover_armed) {
    // A fault inside one of our own steps on this thread (the owner's
    // capture, a thread unwinding itself, the watchdog's writer).
    state->recover_armed = 0;
    siglongjmp(state->recover, 1);
  }
  pid_t owner = g_handler.owner.load(std::memory_order_acquire);
  if ((owner & ~kDumpBit) == self) {
    if (!from_kernel) {
      // A second ^C, torchrun's SIGTERM after its SIGINT, a supervisor's
      // kill landed on the thread writing a report: kept, and raised again
      // once the report is done (dropped if the process ends of the first).
      defer(signo, info);
      errno = saved_errno;
      return;
    }
    raw_log("faultline: fault inside the crash handler (",
            phase_info(g_handler.phase.load(std::memory_order_acquire)).text, "); no report\n");
    int first = g_handler.signo.load(std::memory_order_acquire);
    die_with_default(first ? first : signo);
  }
  int report_signo = signo;
  siginfo_t* report_info = info;
  void* report_uc = ucv;
  if (!state) state = thread_state_find();
  Nested nested =
      state ? chain_call_nested(state, ucv, &report_signo, &report_info, &report_uc) : Nested::kNo;
  if (nested == Nested::kHeld) {
    errno = saved_errno;  // acted on when the program's handler returns
    return;
  }
  if (nested == Nested::kReported) {
    // Raised by the program's handler that faultline called after reporting
    // the fault: only handed on.
    errno = saved_errno;
    chain(signo, info);
    return;
  }
  if (nested == Nested::kReportIt) {
    // Raised by the program's handler that faultline called for a fault
    // (an abort): the report is of that fault; this signal is handed on.
  } else if (from_kernel && chain_call(signo, info, ucv)) {
    errno = saved_errno;
    return;
  }
  if (!report_crash(report_signo, report_info, report_uc)) {
    // Another thread owns the crash and reported it (or faultline stepped
    // aside for a seccomp filter): hand our own signal on as if faultline
    // were not there.
    errno = saved_errno;
    chain(signo, info);
    return;
  }
  errno = saved_errno;
  if (is_shutdown(report_signo)) shutdown_reported();
  // The program's own handler runs next and may recover (a JIT, a runtime):
  // a later crash deserves its own report.
  // A signal kept during a crash report is dropped, as the process ends (a
  // fault recurs when this handler returns, and a signal sent again would
  // be taken before it); one kept during a shutdown report the program's
  // handler takes over is the program's.
  Deferred kept = take_deferred();
  if (chain(signo, info)) {
    release_ownership();
    threads_release_held();
    if (is_shutdown(report_signo)) deliver_deferred(kept, signo);
  }
  // Returning re-executes the faulting instruction under the restored
  // handler (or delivers the re-sent signal).
}

bool report_crash(int signo, siginfo_t* info, void* ucv) {
  pid_t self = sys_gettid();
  const Config& cfg = g_crash.config;
  // How long a thread that crashed second waits for the first one's report:
  // past the watchdog's both stages (which end the process anyway).
  int limit_ms = cfg.watchdog_seconds > 0
                     ? (cfg.watchdog_seconds + kWatchdogGraceSeconds * 2 + 2) * 1000
                     : 60 * 1000;
  __atomic_store_n(&g_claim_tried, true, __ATOMIC_RELAXED);
  int report_gen = g_handler.report_gen.load(std::memory_order_acquire);
  for (int waited_ms = 0;; ++waited_ms) {
    pid_t expected = 0;
    if (g_handler.owner.compare_exchange_strong(expected, self, std::memory_order_acq_rel)) {
      g_handler.claimed_ns = monotonic_ns();
      g_handler.crash_waiting.store(false, std::memory_order_release);
      break;
    }
    if ((expected & kDumpBit) && waited_ms < limit_ms) {
      // A live dump is being written: let it finish, then report the
      // crash. A helper dump gives up at once for a crash; a shutdown
      // signal (a ^C) leaves it to finish, as it does a signal dump.
      if (!is_shutdown(signo)) g_handler.crash_waiting.store(true, std::memory_order_release);
      struct timespec ts = {0, 1000 * 1000};
      nanosleep(&ts, nullptr);
      continue;
    }
    if (expected & kDumpBit) die_with_default(signo);  // the dump never ended
    if (expected == kStoodDown) {                      // faultline stepped aside
      g_handler.crash_waiting.store(false, std::memory_order_release);
      return false;
    }
    // Another thread owns the crash: record ours for its report, leave our
    // crash context for its stack request, and wait for the report.
    record_secondary(self, signo, info, ucv);
    wait_for_report(report_gen, limit_ms);
    return false;
  }
  g_handler.signo.store(signo, std::memory_order_release);
  // A dead stderr pipe must not kill us with SIGPIPE: ignored, a write
  // just fails with EPIPE (and no signal stays pending for later).
  struct sigaction old_pipe;
  ignore_sigpipe(&old_pipe);
  arm_watchdog(cfg.watchdog_seconds);
  OwnerWork work = {signo, info, ucv, false};
  run_on_crash_stack(crash_work, &work);
  disarm_watchdog(cfg.watchdog_seconds);
  real_sigaction(SIGPIPE, &old_pipe, nullptr);
  g_handler.report_gen.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

void release_ownership() {
  g_handler.claimed_ns = 0;
  g_handler.signo.store(0, std::memory_order_release);
  g_handler.writer.store(Writer::kNobody, std::memory_order_release);
  g_handler.owner.store(0, std::memory_order_release);
}

namespace {

// The live dump by the helper, from the dump signal's handler: every other
// thread is stopped by ptrace (its system call restarts), so only this one,
// which the signal interrupted, can see EINTR. The helper reads this
// thread where it waits, in this handler: its stack in the report begins
// with faultline's frames (in libfaultline.so), then the signal frame, then
// the program code the signal interrupted (the report's dumping_tid names
// this thread). Not when faultline_dump_now() sent this signal after its
// own helper dump failed (dump_by_signal_tid). false with *why set: the
// signal request makes the dump, unless a crash came meanwhile.
bool dump_by_helper_here(pid_t self, void* ucv, char* why, size_t why_size) {
  if (g_handler.dump_by_signal_tid.load(std::memory_order_acquire) == self) {
    why[0] = '\0';
    return false;
  }
  const sigset_t* interrupted = ucv ? &static_cast<ucontext_t*>(ucv)->uc_sigmask : nullptr;
  return helper_dump(why, why_size, interrupted, /*in_handler=*/true);
}

// A live dump: a report of every thread, then the process goes on.
// by_helper: the helper may be asked first (never for a dump made by a
// call, which is the fallback of one that was).
void live_dump(int signo, siginfo_t* info, void* ucv, bool by_helper) {
  int saved_errno = errno;
  if (sys_getpid() != g_crash.pid) return;
  pid_t self = sys_gettid();
  // A dump asked for while another is being written waits for it (this
  // thread still answers the other dump's stack request meanwhile); a crash
  // in progress wins.
  __atomic_store_n(&g_claim_tried, true, __ATOMIC_RELAXED);
  for (int waited_ms = 0;; ++waited_ms) {
    pid_t expected = 0;
    if (g_handler.owner.compare_exchange_strong(expected, self | kDumpBit,
                                                std::memory_order_acq_rel)) {
      g_handler.claimed_ns = monotonic_ns();
      break;
    }
    if (!(expected & kDumpBit) || (expected & ~kDumpBit) == self || waited_ms > 10000) {
      errno = saved_errno;
      return;
    }
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  g_handler.signo.store(0, std::memory_order_release);
  struct sigaction old_pipe;
  ignore_sigpipe(&old_pipe);
  char why[sizeof g_dump_by_signal_because] = "";
  bool helped = by_helper && dump_by_helper_here(self, ucv, why, sizeof why);
  // A crash waits for this dump: its report has every thread.
  bool crash_came = by_helper && g_handler.crash_waiting.load(std::memory_order_acquire);
  if (!helped && !crash_came) {
    if (why[0]) str_copy(g_dump_by_signal_because, sizeof g_dump_by_signal_because, why);
    OwnerWork work = {signo, info, ucv, false};
    run_on_crash_stack(dump_work, &work);
    if (why[0]) g_dump_by_signal_because[0] = '\0';
    if (work.written) g_handler.dumps_written.fetch_add(1, std::memory_order_acq_rel);
  }
  real_sigaction(SIGPIPE, &old_pipe, nullptr);
  // The process goes on: keep descriptors in reserve again.
  reserve_fds();
  Deferred kept = take_deferred();
  g_handler.claimed_ns = 0;
  g_handler.owner.store(0, std::memory_order_release);
  deliver_deferred(kept, 0);
  errno = saved_errno;
}

}  // namespace

void dump_signal_handler(int signo, siginfo_t* info, void* ucv) {
  live_dump(signo, info, ucv, /*by_helper=*/true);
}

void dump_in_process(int signo, siginfo_t* info, void* ucv) {
  live_dump(signo, info, ucv, /*by_helper=*/false);
}

FAULTLINE_START_TEXT void reset_ownership_after_fork() {
  if (g_nsecondary != 0) g_nsecondary = 0;
  if (!__atomic_load_n(&g_claim_tried, __ATOMIC_RELAXED)) return;
  g_handler.claimed_ns = 0;
  g_handler.owner.store(0, std::memory_order_relaxed);
  g_handler.writer.store(Writer::kNobody, std::memory_order_relaxed);
  g_handler.deferred_signal.store(0, std::memory_order_relaxed);
  g_handler.signo.store(0, std::memory_order_relaxed);
  g_handler.crash_waiting.store(false, std::memory_order_relaxed);
  g_handler.dump_by_signal_tid.store(0, std::memory_order_relaxed);
}

}  // namespace faultline::core
