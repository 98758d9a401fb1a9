// Calling the program's own handler for a hardware fault as a function,
// while faultline stays installed (chain.h says when and why). Runtimes
// that turn faults into something else (a JVM's null checks and safepoint
// polls, a wasm engine's bounds checks, Mono's managed exceptions) do so
// thousands of times in a healthy process; a report each, or faultline
// stepping aside after the first, would both be wrong.
//
// The handler runs on this thread's current stack with its sa_mask and the
// signal itself blocked: a re-raise (faulthandler's) then stays pending until
// faultline has written the report. The price: a fault inside that handler
// itself ends the process at once (as it would without faultline). A handler
// with SA_NODEFER runs with the signal unblocked, as the kernel runs it: it
// may jump away with sigsetjmp(env, 0) or longjmp, which restore no mask, and
// a signal left blocked would make the thread's next fault kill the process.
// Its re-raise is then held by faultline's handler (chain_call_nested). Not
// where faultline was loaded late: the handler's reset to the default reaches
// the kernel there, and an unblocked re-raise would end the process before
// the report.
#include "core/signal/chain_call.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include "core/base/fd_identity.h"
#include "core/base/raw_log.h"
#include "core/base/safe_read.h"
#include "core/base/sigaction_real.h"
#include "core/base/signals.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/base/thread_state.h"
#include "core/capture/threads.h"
#include "core/crash_state.h"
#include "core/handler_state.h"
#include "core/signal/chain.h"
#include "core/signal/fault_access.h"
#include "core/signal/handler.h"
#include "core/write/report_file.h"
#include "core/write/stderr_summary.h"

namespace faultline::core {

volatile int g_sigaction_interposed = 0;

namespace {

std::atomic<uint64_t> g_calls{0};
// A report file's name: faultline-<time>-<host>-<pid>-<tid>-<random>.json.
constexpr size_t kReportNameBytes = 160;
static_assert(std::atomic<uint64_t>::is_always_lock_free);

enum class Outcome {
  kRecovered,       // pc or sp changed (a siglongjmp never comes back here), or
                    // the faulting access is allowed now
  kUnchanged,       // returned with nothing changed: the instruction is retried
  kFatal,           // re-raised or reset the disposition: it means to die
  kReportedInside,  // raised another signal, whose handling reported the fault
};

// A signal the handler re-raised, taken off the pending set so the report
// can be written with the signal unblocked (a fault of faultline's own is
// recovered only then), and raised again afterwards.
struct Pending {
  bool valid;
  siginfo_t info;
};

bool is_function(const struct sigaction& sa) {
  if (sa.sa_flags & SA_SIGINFO) return sa.sa_sigaction != nullptr;
  return sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
}

bool is_ours(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == crash_signal_handler;
}

bool still_ours(int signo) {
  struct sigaction cur;
  if (real_sigaction(signo, nullptr, &cur) != 0) return true;
  return is_ours(cur);
}

// The handler set a disposition of its own while it ran (faultline's
// sigaction() was not in the way: no FAULTLINE_STAY_IN_FRONT, or loaded
// late). Returns true when that means it gives up (the default, or ignored:
// for a fault that recurs, the same). A one-shot handler (SA_RESETHAND) that
// arms itself again stays behind faultline; another function takes the
// signal over, and faultline steps aside as for any later sigaction().
bool gave_up(int signo, const struct sigaction& called) {
  struct sigaction cur;
  if (real_sigaction(signo, nullptr, &cur) != 0 || is_ours(cur)) return false;
  if (!is_function(cur)) return true;
  if (same_function(cur, called)) {
    g_crash.previous[signo] = cur;
    struct sigaction sa = {};
    sa.sa_sigaction = crash_signal_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;  // as installed
    real_sigaction(signo, &sa, nullptr);
  } else {
    g_crash.handled[signo] = false;
  }
  return false;
}

const ucontext_t& uc_of(void* ucv) {
  return *static_cast<ucontext_t*>(ucv);
}

uint64_t bit(int signo) {
  return uint64_t{1} << (signo - 1);
}

// Takes signo off this thread's (or the process's) pending signals.
bool take_pending(int signo, Pending* out) {
  uint64_t pending = 0;
  if (syscall(SYS_rt_sigpending, &pending, sizeof pending) != 0 || !(pending & bit(signo))) {
    return false;
  }
  uint64_t set = bit(signo);
  struct timespec zero = {0, 0};
  out->valid = syscall(SYS_rt_sigtimedwait, &set, &out->info, &zero, sizeof set) == signo;
  return true;
}

bool same_fault(const ReturnedFault& r, int signo, const siginfo_t* info, void* ucv) {
  if (r.signo != signo || r.addr != reinterpret_cast<uintptr_t>(info->si_addr)) return false;
  uint64_t now[kFaultRegCount];
  memcpy(now, uc_fault_regs(uc_of(ucv)), sizeof now);
  for (int i = 0; i < kFaultRegCount; ++i) {
    if (r.regs[i] != now[i]) return false;
  }
  return true;
}

void remember(ThreadState* st, int signo, const siginfo_t* info, void* ucv, bool reported) {
  st->returned.addr = reinterpret_cast<uintptr_t>(info->si_addr);
  memcpy(st->returned.regs, uc_fault_regs(uc_of(ucv)), sizeof st->returned.regs);
  st->returned.reported = reported ? 1 : 0;
  st->returned.signo = signo;
}

// Calls the handler faultline hands signo on to, as the kernel would have
// (its mask blocked, SA_RESETHAND honoured), and says what it did. `listed`:
// st is this thread's entry, which faultline's handler finds again.
Outcome call(ThreadState* st, int signo, siginfo_t* info, void* ucv, bool reported, bool listed,
             Pending* pending) {
  struct sigaction h = g_crash.previous[signo];
  if (h.sa_flags & SA_RESETHAND) {
    // One-shot, as the kernel would have it: unless it arms itself again,
    // the default from now on.
    g_crash.previous[signo].sa_handler = SIG_DFL;
    g_crash.previous[signo].sa_flags = 0;
  }
  uintptr_t pc = uc_pc(uc_of(ucv));
  uintptr_t sp = uc_sp(uc_of(ucv));
  // Whether the mapping denied this access: then a mapping that allows it
  // once the handler returns means the handler fixed it. SEGV_ACCERR says
  // so itself (its other causes are excluded by fault_access_now). For
  // SEGV_MAPERR the mapping is asked now, as a guard region inside a
  // mapping that allows the access faults so too; not below 64 KiB, where
  // nothing is mapped (a null pointer: a JVM's null checks).
  siginfo_t fault = *info;
  bool denied_before = false;
  if (signo == SIGSEGV && info->si_code == SEGV_ACCERR) {
    denied_before = true;
  } else if (signo == SIGSEGV && info->si_code == SEGV_MAPERR) {
    denied_before = reinterpret_cast<uintptr_t>(info->si_addr) < (uintptr_t{64} << 10) ||
                    fault_access_now(signo, &fault, ucv) == Access::kDenied;
  }
  volatile uint64_t cookie =
      g_calls.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ull ^ st->tid;
  st->call.cookie = cookie;
  st->call.signo = signo;
  st->call.info = *info;
  st->call.uc = ucv;
  st->call.reported = reported ? 1 : 0;
  st->call.has_deferred = 0;
  st->call.nodefer = listed && (h.sa_flags & SA_NODEFER) && g_sigaction_interposed ? 1 : 0;
  st->call.reraised = 0;
  __atomic_store_n(&st->call.sp, reinterpret_cast<uintptr_t>(&cookie), __ATOMIC_RELEASE);
  sigset_t block = h.sa_mask, old;
  if (!st->call.nodefer) sigaddset(&block, signo);
  sigprocmask(SIG_BLOCK, &block, &old);
  if (h.sa_flags & SA_SIGINFO) {
    h.sa_sigaction(signo, info, ucv);
  } else {
    h.sa_handler(signo);
  }
  __atomic_store_n(&st->call.sp, 0, __ATOMIC_RELEASE);
  pending->valid = false;
  bool raised = take_pending(signo, pending);
  if (!raised && st->call.reraised) {
    pending->valid = true;
    pending->info = st->call.reraise_info;
    raised = true;
  }
  st->call.nodefer = 0;
  st->call.reraised = 0;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  if (st->call.reported && !reported) return Outcome::kReportedInside;
  if (raised || gave_up(signo, h)) return Outcome::kFatal;
  if (uc_pc(uc_of(ucv)) != pc || uc_sp(uc_of(ucv)) != sp) {
    return Outcome::kRecovered;
  }
  // It reset the signal through faultline's sigaction() (recorded, not yet
  // applied), or was one-shot, and returns to let the retried instruction
  // kill.
  if (st->call.has_deferred || !is_function(g_crash.previous[signo])) return Outcome::kFatal;
  // A collector's barrier fixes the page and returns: the retried access
  // then succeeds, and the same store faulting again later, with every
  // register the same, is a new fault, not this one retried in vain.
  if (denied_before && fault_access_now(signo, &fault, ucv) == Access::kPermitted) {
    return Outcome::kRecovered;
  }
  return Outcome::kUnchanged;
}

// The handler meant the process to die: what it chose takes effect when
// faultline's handler returns (the re-raised signal is delivered, or the
// instruction is retried under the disposition it set).
void let_it_die(int signo, const Pending& pending) {
  if (still_ours(signo)) {
    // It raised the signal again without resetting it: step aside, so the
    // signal reaches the program's handler as it would have.
    struct sigaction prev = g_crash.previous[signo];
    if (!is_function(prev)) {
      prev.sa_handler = SIG_DFL;
      prev.sa_flags = 0;
    }
    g_crash.handled[signo] = false;
    real_sigaction(signo, &prev, nullptr);
  } else {
    g_crash.handled[signo] = false;
  }
  if (!pending.valid) return;
  // Blocked until the return restores the interrupted context's mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  siginfo_t si = pending.info;
  if (syscall(SYS_rt_tgsigqueueinfo, sys_getpid(), sys_gettid(), signo, &si) != 0) {
    syscall(SYS_tgkill, sys_getpid(), sys_gettid(), signo);
  }
}

// A report written before the handler ran, which then recovered (it moved
// the pc or sp): the fault did not end the process, so the report is taken
// back, with the minidump of the same name if there is one.
void withdraw(const char* name) {
  const Config& cfg = g_crash.config;
  if (!name[0] || cfg.dir_fd < 0 || !fd_still(cfg.dir_fd, g_crash.dir_id)) return;
  if (unlinkat(cfg.dir_fd, name, 0) != 0) return;
  char dmp[kReportNameBytes + 8];
  size_t len = str_len(name);
  StrBuf d(dmp, sizeof dmp);
  d.add_n(name, len > 5 ? len - 5 : len).add(".dmp");  // "<stem>.json" -> "<stem>.dmp"
  if (!d.truncated()) unlinkat(cfg.dir_fd, dmp, 0);
  if (str_eq(path_basename(g_handler.last_report), name)) g_handler.last_report[0] = '\0';
  if (cfg.write_stderr) {
    raw_log("faultline: the program's handler recovered from the fault; report withdrawn: ");
    write_escaped_line(name, len);
  }
}

void apply_deferred(ThreadState* st, int signo) {
  if (!st->call.has_deferred) return;
  st->call.has_deferred = 0;
  g_crash.previous[signo] = st->call.deferred;
}

// The program's handler decides first (chain.h), whether it was there
// before faultline or installed later and kept behind it: its recoveries
// then cost no report. FAULTLINE_CHAIN_ORDER=report-first for a handler that
// ends the process without handing the signal on (_exit).
bool handler_first() {
  return g_crash.config.chain_order != ChainOrder::kReportFirst;
}

}  // namespace

bool chain_call(int signo, siginfo_t* info, void* ucv) {
  if (!ucv || signo <= 0 || signo >= 65 || !g_crash.handled[signo]) return false;
  if (signo != SIGSEGV && signo != SIGBUS && signo != SIGILL && signo != SIGFPE) return false;
  if (!is_function(g_crash.previous[signo])) return false;
  ThreadState* st = thread_state();
  ThreadState unlisted;
  if (!st) {
    // Every entry belongs to a live thread: the handler still runs first,
    // without the record (a signal it raises is reported as itself, and a
    // fault it returns from unchanged is retried without end, as it would
    // be without faultline).
    memset(&unlisted, 0, sizeof unlisted);
    st = &unlisted;
  }
  bool repeat = same_fault(st->returned, signo, info, ucv);
  bool reported = repeat && st->returned.reported;
  st->returned.signo = 0;
  Pending pending = {};
  bool python_handler = (g_crash.previous_is_python >> (signo - 1)) & 1;
  // The handler about to run (it may reset itself before raising again).
  const struct sigaction& h = g_crash.previous[signo];
  uintptr_t handler_pc = (h.sa_flags & SA_SIGINFO) ? reinterpret_cast<uintptr_t>(h.sa_sigaction)
                                                   : reinterpret_cast<uintptr_t>(h.sa_handler);
  if (handler_first() && !repeat) {
    switch (call(st, signo, info, ucv, false, st != &unlisted, &pending)) {
      case Outcome::kRecovered:
      case Outcome::kReportedInside:
        break;
      case Outcome::kUnchanged:
        remember(st, signo, info, ucv, false);
        break;
      case Outcome::kFatal:
        // The process ends now: the crash stays owned, so another thread's
        // fault in the meantime is recorded for this report, not reported
        // on its own.
        g_handler.python_text_written = python_handler;
        g_handler.fatal_handler_pc = handler_pc;
        report_crash(signo, info, ucv);
        apply_deferred(st, signo);
        let_it_die(signo, pending);
        return true;
    }
    apply_deferred(st, signo);
    return true;
  }
  // The report first: FAULTLINE_CHAIN_ORDER=report-first (the handler may
  // _exit), or it returned from this very fault unchanged before.
  char written[kReportNameBytes] = "";
  // Whether this fault has a report of its own (or had one before).
  bool own = true;
  if (!reported) {
    char before[kReportNameBytes];
    str_copy(before, sizeof before, path_basename(last_report_path()));
    if (report_crash(signo, info, ucv)) {
      const char* now = path_basename(last_report_path());
      if (!str_eq(now, before)) str_copy(written, sizeof written, now);
      release_ownership();
      // The program's handler may jump away and never come back here: the
      // other threads cannot wait for its verdict (they would stay frozen
      // under a runtime that recovered). The report is out.
      threads_release_held();
    } else {
      // Another thread owned the crash (ours is listed in its report). A
      // runtime faulting on several threads at once recovers that one too,
      // so this fault is still the handler's to decide; handing it on here
      // would take faultline out for good.
      own = false;
    }
  }
  Outcome outcome = call(st, signo, info, ucv, own, st != &unlisted, &pending);
  apply_deferred(st, signo);
  // Held by another thread's report meanwhile (ours let them go above): the
  // process goes on unless it meant to die.
  if (outcome != Outcome::kFatal) threads_release_held();
  if (outcome == Outcome::kRecovered) withdraw(written);
  if (outcome == Outcome::kUnchanged) {
    // Retried; if it faults again the same way, no second report.
    remember(st, signo, info, ucv, own);
  } else if (outcome == Outcome::kFatal) {
    if (!own) report_crash(signo, info, ucv);  // the other report may have been withdrawn
    let_it_die(signo, pending);
  }
  return true;
}

namespace {

// Whether `below` (a stack address of code running now, or of the code a
// signal interrupted) lies inside the call to the program's handler that
// this thread's record describes: below the caller's frame on the same
// stack, that frame alive (its cookie still there). A record left by a
// handler that siglongjmp'd away fails this. The handler's frames may be
// large (redis's memory test keeps 1 MiB on its stack): up to 8 MiB, a
// thread's usual stack.
bool inside_call(const ThreadState* st, uintptr_t below) {
  uintptr_t at = __atomic_load_n(&st->call.sp, __ATOMIC_ACQUIRE);
  uint64_t cookie = 0;
  if (at == 0 || below == 0 || below >= at || at - below >= (uintptr_t{8} << 20)) return false;
  // A call made on the alternate stack: a signal from inside it finds the
  // thread on that stack still (the kernel does not switch again). One from
  // the thread's own stack came after a jump out of it, however close the
  // two stacks lie in memory (a thread's stack and its alternate stack are
  // often neighbours), with the stale record's cookie still in place.
  stack_t ss;
  if (sigaltstack(nullptr, &ss) == 0 && !(ss.ss_flags & SS_DISABLE)) {
    uintptr_t lo = reinterpret_cast<uintptr_t>(ss.ss_sp);
    bool at_on_alt = at >= lo && at - lo < ss.ss_size;
    bool below_on_alt = below >= lo && below - lo < ss.ss_size;
    if (at_on_alt && !below_on_alt) return false;
  }
  return safe_read_obj(&cookie, at) && cookie == st->call.cookie;
}

}  // namespace

Nested chain_call_nested(ThreadState* st, void* ucv, int* signo, siginfo_t** info, void** uc) {
  if (!__atomic_load_n(&st->call.sp, __ATOMIC_ACQUIRE)) return Nested::kNo;
  if (!inside_call(st, ucv ? uc_sp(uc_of(ucv)) : 0)) {
    __atomic_store_n(&st->call.sp, 0, __ATOMIC_RELEASE);
    return Nested::kNo;
  }
  if (st->call.nodefer && *signo == st->call.signo && *info &&
      signal_sent_by_process((*info)->si_code)) {
    // The SA_NODEFER handler raised its signal again (faulthandler does,
    // after its traceback): held, as the kernel would keep it pending for a
    // handler with the signal blocked.
    if (!st->call.reraised) {
      st->call.reraise_info = **info;
      st->call.reraised = 1;
    }
    return Nested::kHeld;
  }
  if (st->call.reported) return Nested::kReported;
  st->call.reported = 1;
  *signo = st->call.signo;
  *info = &st->call.info;
  *uc = st->call.uc;
  return Nested::kReportIt;
}

bool chain_call_defer(int signo, const struct sigaction& act) {
  ThreadState* st = thread_state_find();
  if (!st || st->call.signo != signo) return false;
  st->call.deferred = act;
  st->call.has_deferred = 1;
  return true;
}

bool chain_call_active(int signo) {
  const ThreadState* st = thread_state_find();
  volatile char here = 0;
  return st && st->call.signo == signo && inside_call(st, reinterpret_cast<uintptr_t>(&here));
}

}  // namespace faultline::core
