// The fatal-signal handler. Runs on the alternate signal stack, possibly with
// the heap corrupt and locks held by the thread that died. Everything it
// touches was prepared at install (src/install/install.cpp); see DESIGN.md for the rules.
//
// Order: claim the crash (one CAS on the thread id), arm the watchdog,
// capture into the arena, print the stderr summary, write the report under a
// temporary name and rename it, then hand the signal on.
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/crash.h"
#include "core/elf_symbols.h"
#include "core/raw_log.h"
#include "core/recover.h"
#include "core/safe_read.h"
#include "core/sigaction_real.h"
#include "core/signals.h"
#include "core/str.h"
#include "core/terminate.h"
#include "core/threads.h"
#include "core/time_fmt.h"
#include "core/torchelastic.h"
#include "core/unwind.h"

namespace faultline::core {

CrashState g_crash;
SigactionFn g_real_sigaction = nullptr;  // set at install (src/install/sigaction_hook.cpp)
TerminateInfo g_terminate;  // filled by the terminate handler (src/install/terminate.cpp)
// Set while a capture phase runs: a fault inside it jumps back to the
// handler, which records the phase as failed and goes on with the next one.
__thread sigjmp_buf t_recover __attribute__((tls_model("initial-exec")));
__thread volatile int t_recover_armed __attribute__((tls_model("initial-exec")));

// Crashes of other threads that arrived while the report was being made.
SecondaryCrash g_secondary[kMaxSecondary];
volatile int g_nsecondary = 0;

namespace {

// The thread that owns the crash (or a live dump); 0 while none does.
volatile pid_t g_owner = 0;
volatile const char* g_phase = "start";
volatile int g_signo = 0;
struct sigaction g_old_alarm;

pid_t sys_gettid() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}
pid_t sys_getpid() {
  return static_cast<pid_t>(syscall(SYS_getpid));
}

// Restores the default action for signo and sends it to this thread; the
// process then dies exactly as it would have without us.
[[noreturn]] void die_with_default(int signo) {
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

// The watchdog, in two stages, on a process-directed alarm (the owner may
// be blocking every signal: libunwind does around the loader's lock).
//  - First expiry: the owner abandons the capture phase that hangs and goes
//    on to write the report, skipping the remaining slow phases. If the
//    alarm lands on another thread, that thread forwards it to the owner.
//  - Second expiry, FAULTLINE_WATCHDOG + 2 s: if the owner never reached
//    the report (stuck with signals blocked), another thread writes it from
//    what was captured so far; then the process ends with its signal.
// Who writes the crash report: 1 the owner, 2 the watchdog's stand-in.
// One compare-and-swap, so never both.
volatile int g_writer = 0;

pid_t g_watchdog_owner = 0;
volatile int g_watchdog_stage = 0;   // 0 armed, 1 first expiry seen, 2 second
volatile int g_phase_abandoned = 0;  // the owner acted on the first expiry
constexpr int kWatchdogGraceSeconds = 2;

void write_partial_report();  // below

// The current phase's short name ("unwind"), for messages.
const char* phase_name(char* buf, size_t cap) {
  const char* p = const_cast<const char*>(g_phase);
  size_t n = 0;
  while (p && p[n] && p[n] != ':' && n + 1 < cap) {
    buf[n] = p[n];
    ++n;
  }
  buf[n] = '\0';
  return buf;
}

volatile int g_watchdog_active = 0;
volatile int g_forwarding = 0;

void watchdog_expired(int, siginfo_t* info, void*) {
  if (!g_watchdog_active) return;  // a forwarded alarm after the report: nothing to do
  char phase[32];
  phase_name(phase, sizeof phase);
  bool on_owner = sys_gettid() == g_watchdog_owner;
  bool forwarded = info && info->si_code == SI_TKILL && info->si_pid == sys_getpid();
  int expected = 0;
  bool first = __atomic_compare_exchange_n(&g_watchdog_stage, &expected, 1, false, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE);
  if (first) alarm(kWatchdogGraceSeconds);
  if (on_owner && (first || forwarded)) {
    if (!g_phase_abandoned && t_recover_armed) {
      g_phase_abandoned = 1;
      raw_log("faultline: watchdog: capture phase \"", phase,
              "\" took too long; writing the report without the rest of it\n");
      t_recover_armed = 0;
      siglongjmp(t_recover, 1);
    }
    return;  // writing the report: let it finish within the grace period
  }
  if (first) {
    // Not the owner: hand the first stage to it.
    __atomic_fetch_add(&g_forwarding, 1, __ATOMIC_ACQ_REL);
    if (g_watchdog_active) syscall(SYS_tgkill, sys_getpid(), g_watchdog_owner, SIGALRM);
    __atomic_fetch_sub(&g_forwarding, 1, __ATOMIC_ACQ_REL);
    return;
  }
  g_watchdog_stage = 2;
  int nobody = 0;
  if (!on_owner && __atomic_compare_exchange_n(&g_writer, &nobody, 2, false, __ATOMIC_ACQ_REL,
                                               __ATOMIC_ACQUIRE)) {
    raw_log("faultline: watchdog: the crash handler is stuck in phase \"", phase,
            "\"; writing what was captured from another thread\n");
    alarm(kWatchdogGraceSeconds);  // bound this thread's writing too
    write_partial_report();
  } else {
    raw_log("faultline: watchdog: the crash handler ran too long; giving up in phase \"", phase,
            "\"\n");
  }
  die_with_default(g_signo ? g_signo : SIGABRT);
}

void arm_watchdog(int seconds) {
  if (seconds <= 0) return;
  struct sigaction sa = {};
  sa.sa_sigaction = watchdog_expired;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  real_sigaction(SIGALRM, &sa, &g_old_alarm);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  g_watchdog_owner = sys_gettid();
  g_watchdog_stage = 0;
  g_watchdog_active = 1;
  g_phase_abandoned = 0;
  alarm(static_cast<unsigned>(seconds));
}

void disarm_watchdog(int seconds) {
  if (seconds <= 0) return;
  g_watchdog_active = 0;
  alarm(0);
  // A forwarded or already fired alarm must not reach the program's own
  // SIGALRM action (often the default: terminate) once it is back: block
  // it, wait out a forward in flight, and take any pending one.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  for (int spins = 0; __atomic_load_n(&g_forwarding, __ATOMIC_ACQUIRE) && spins < 1000; ++spins) {
    struct timespec ts = {0, 100 * 1000};
    nanosleep(&ts, nullptr);
  }
  struct timespec zero = {0, 0};
  while (syscall(SYS_rt_sigtimedwait, &set, nullptr, &zero, sizeof(uint64_t)) == SIGALRM) {
  }
  real_sigaction(SIGALRM, &g_old_alarm, nullptr);
}

// Hands the signal on: restore the handler that was there before us (or the
// default) and make the signal happen again where it first happened, so a
// core file shows the crash and not our handler. A hardware fault recurs by
// itself when the faulting instruction re-executes on return. A signal that
// would not recur (sent by a process: abort, kill; or a trap, whose pc is
// already past the int3) is re-sent to this thread while blocked here, and
// is delivered when the return restores the interrupted context's mask.
// Returns true when the previous handler is a function of the program's
// (which may recover), false when the process now dies.
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
    syscall(SYS_tgkill, sys_getpid(), sys_gettid(), signo);
  }
  return prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN;
}

// The crash stack: the owner of a crash or dump runs its capture here, not
// on whatever alternate stack the thread has (Python's faulthandler installs
// one of under 10 KiB). Mapped at install with a guard page.
constexpr size_t kCrashStackBytes = 512u << 10;
char* g_crash_stack = nullptr;  // lowest usable byte

// The signal mask to run the capture with; every signal stays blocked
// while the stack pointer and the alternate stack disagree.
sigset_t g_switch_mask;

void trampoline_body(void (*fn)(void*), void* arg) {
  // Off the alternate stack now: disable it while we run, so a fault in the
  // capture is delivered here on the crash stack instead of at the top of
  // the alternate stack, where it would overwrite the frame we return to.
  stack_t off = {};
  off.ss_flags = SS_DISABLE;
  stack_t old = {};
  bool swapped = sigaltstack(&off, &old) == 0;
  sigprocmask(SIG_SETMASK, &g_switch_mask, nullptr);
  fn(arg);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  if (swapped) sigaltstack(&old, nullptr);
}

// Runs fn(arg) on the crash stack (or here when there is none or we are on
// it already).
void run_on_crash_stack(void (*fn)(void*), void* arg) {
  char* base = g_crash_stack;
  uintptr_t sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  uintptr_t lo = reinterpret_cast<uintptr_t>(base);
  if (!base || (sp >= lo && sp < lo + kCrashStackBytes)) {
    fn(arg);
    return;
  }
  char* top = base + kCrashStackBytes;  // 16-byte aligned (page aligned)
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &g_switch_mask);
  void (*body)(void (*)(void*), void*) = trampoline_body;
  __asm__ volatile(
      "mov %%rsp, %%rbx\n\t"
      "mov %[top], %%rsp\n\t"
      "call *%[body]\n\t"
      "mov %%rbx, %%rsp\n\t"
      : "+D"(fn), "+S"(arg)
      : [top] "r"(top), [body] "r"(body)
      : "rbx", "rax", "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1",
        "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)",
        "st(7)");
  sigprocmask(SIG_SETMASK, &g_switch_mask, nullptr);
}

uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Runs one capture phase under the recovery point and times it. `name` is
// "<phase>: what a fault inside it means"; the part before ':' names the
// phase in the report's timings.
template <typename Fn>
void run_phase(const char* name, Capture* c, Fn fn) {
  uint64_t start = now_ns();
  struct PhaseTimer {
    Capture* c;
    const char* name;
    uint64_t start;
    ~PhaseTimer() {
      if (c->nphases < kMaxPhases) c->phases[c->nphases++] = {name, now_ns() - start};
    }
  } timer{c, name, start};
  g_phase = name;
  if (g_watchdog_stage != 0 && !str_starts_with(name, "diagnosis") &&
      !str_starts_with(name, "annotations")) {
    // Out of time: only the cheap phases still run.
    c->errors.add(name);
    if (!c->watchdog_noted) {
      c->watchdog_noted = true;
      c->errors.add("watchdog: out of time; the listed phases were skipped or abandoned");
    }
    return;
  }
  if (sigsetjmp(t_recover, 1) == 0) {
    t_recover_armed = 1;
    fn();
  } else {
    c->errors.add(name);  // the phase name says what was lost
    if (g_watchdog_stage != 0 && !c->watchdog_noted) {
      c->watchdog_noted = true;
      c->errors.add("watchdog: out of time; the listed phases were skipped or abandoned");
    }
  }
  t_recover_armed = 0;
}

void capture_annotations(Capture* c, Arena* arena) {
  constexpr size_t kStorage = kMaxAnnotations * (kAnnotationKeyBytes + kAnnotationValueBytes);
  char* storage = static_cast<char*>(arena->alloc(kStorage, 1));
  c->annotations = arena->alloc_array<AnnotationView>(kMaxAnnotations);
  if (storage && c->annotations) {
    c->nannotations = annotations_snapshot(c->annotations, kMaxAnnotations, storage, kStorage);
  }
  constexpr size_t kThreadStorage =
      kMaxThreadAnnotations * (kAnnotationKeyBytes + kThreadValueBytes);
  storage = static_cast<char*>(arena->alloc(kThreadStorage, 1));
  c->thread_annotations = arena->alloc_array<AnnotationView>(kMaxThreadAnnotations);
  if (storage && c->thread_annotations) {
    c->nthread_annotations = thread_annotations_snapshot(
        c->thread_annotations, kMaxThreadAnnotations, storage, kThreadStorage);
  }
  constexpr size_t kCrumbStorage = kMaxBreadcrumbs * kBreadcrumbBytes;
  storage = static_cast<char*>(arena->alloc(kCrumbStorage, 1));
  c->breadcrumbs = arena->alloc_array<BreadcrumbView>(kMaxBreadcrumbs);
  if (storage && c->breadcrumbs) {
    c->nbreadcrumbs = breadcrumbs_snapshot(c->breadcrumbs, kMaxBreadcrumbs, storage, kCrumbStorage);
  }
}

// Gives every native frame its origin. Frames of one function share one
// symbol string (the symbolizer's name cache), so a small cache keyed by
// (module, symbol) classifies a thousand-frame capture with a few dozen
// table walks.
void classify_frames(Capture* c) {
  struct Entry {
    int module;
    const char* symbol;
    const Origin* origin;
  };
  constexpr int kSlots = 512;
  static Entry cache[kSlots];  // static: the signal stack may be small
  for (Entry& e : cache) e = {-2, nullptr, nullptr};
  for (int t = 0; t < c->nthreads; ++t) {
    ThreadCapture& th = c->threads[t];
    for (int i = 0; i < th.nframes; ++i) {
      NativeFrame& f = th.frames[i];
      uintptr_t key =
          reinterpret_cast<uintptr_t>(f.symbol) ^ (static_cast<uintptr_t>(f.module) << 4);
      Entry& e = cache[(key >> 3) % kSlots];
      if (e.module == f.module && e.symbol == f.symbol && e.origin) {
        f.origin = e.origin;
        continue;
      }
      f.origin =
          &classify_native(f.module >= 0 ? c->modules.items[f.module].path : nullptr, f.symbol);
      e = {f.module, f.symbol, f.origin};
    }
  }
}

void capture_all(Capture* c, const char* kind, int signo, siginfo_t* info, void* ucv) {
  Arena* arena = &g_crash.arena;
  const Config& cfg = g_crash.config;
  c->kind = kind;
  c->signo = signo;
  c->info = *info;
  if (ucv) {
    c->uc = *static_cast<ucontext_t*>(ucv);
    c->have_uc = true;
  }
  c->pid = sys_getpid();
  c->tid = sys_gettid();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  c->time_sec = ts.tv_sec;
  c->time_nsec = ts.tv_nsec;

  c->modules.capacity = kMaxModules;
  c->modules.items = arena->alloc_array<Module>(kMaxModules);
  c->threads = arena->alloc_array<ThreadCapture>(kMaxThreads);
  if (!c->modules.items || !c->threads) {
    c->errors.add("arena: too small for the module table");
    return;
  }
  run_phase("modules: fault while reading the link map", c,
            [&] { collect_modules(&c->modules, arena, &c->errors); });

  ThreadCapture* t = &c->threads[0];
  c->nthreads = 1;
  t->tid = c->tid;
  t->crashed = !str_eq(kind, "dump");
  prctl(PR_GET_NAME, t->name, 0, 0, 0);
  t->frames = arena->alloc_array<NativeFrame>(static_cast<size_t>(cfg.max_frames));
  if (t->frames && c->have_uc) {
    run_phase("unwind: fault while unwinding (frames so far kept)", c,
              [&] { unwind_from_context(&c->uc, c->modules, t, cfg.max_frames, &c->errors); });
    for (int i = 0; i < t->nframes; ++i) {
      t->frames[i].module = find_module(c->modules, t->frames[i].pc);
    }
    t->captured = t->nframes > 0;
  }
  run_phase("threads: fault while capturing other threads", c, [&] {
    c->nthreads = capture_other_threads(c->threads, kMaxThreads, cfg.max_threads, cfg.max_frames,
                                        cfg.thread_timeout_ms, c->modules, arena, &c->threads_total,
                                        &c->threads_cut, &c->threads_park_ns, &c->errors);
  });
  // If the watchdog cut the threads phase short, no request may stay open.
  threads_abort_capture();
  for (int k = 1; k < c->nthreads; ++k) {
    ThreadCapture* o = &c->threads[k];
    for (int i = 0; i < o->nframes; ++i)
      o->frames[i].module = find_module(c->modules, o->frames[i].pc);
  }
  run_phase("symbols: fault while reading symbol tables", c,
            [&] { symbolize_threads(c->modules, c->threads, c->nthreads, arena, &c->errors); });
  run_phase("classify: fault while classifying frames", c, [&] { classify_frames(c); });
  run_phase("python: fault while walking the interpreter", c, [&] {
    capture_python(c->modules, arena, &c->python, kMaxThreads, cfg.max_frames, &c->errors);
  });
  run_phase("annotations: fault while copying annotations", c,
            [&] { capture_annotations(c, arena); });
  if (cfg.callback) {
    run_phase("callback: fault inside the user callback", c, [&] {
      CallbackWriter w = {arena, arena->alloc_array<AnnotationView>(CallbackWriter::kMax), 0};
      if (!w.items) return;
      cfg.callback(reinterpret_cast<faultline_callback_writer*>(&w), cfg.callback_data);
      c->callback_items = w.items;
      c->ncallback_items = w.count;
    });
  }
  run_phase("diagnosis: fault while diagnosing", c, [&] { diagnose(c); });
}

char g_last_report[4200];
volatile int g_dumps_written = 0;

void release_reserved_fd() {
  int fd = __atomic_exchange_n(&g_crash.reserved_fd, -1, __ATOMIC_ACQ_REL);
  // Only if the number is still ours: never close the program's file.
  if (fd >= 0 && fd_still(fd, g_crash.reserved_id)) close(fd);
}

// The crash state lives in the arena; each capture starts it afresh.
Capture* begin_capture() {
  // Frees the descriptor reserved at install: a process that ran out of file
  // descriptors can still read symbol tables and write its report.
  release_reserved_fd();
  safe_read_check_fds();
  g_crash.arena.reset();
  Capture* c = static_cast<Capture*>(g_crash.arena.alloc(sizeof(Capture), alignof(Capture)));
  g_crash.capture = c;
  if (c) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c->start_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
  }
  return c;
}

// Creates the report: <dir>/.faultline-<...>.json.tmp, written, renamed.
// Falls back to writing the JSON on stderr when no file can be made.
int g_write_errno = 0;  // why the last report could not be written

// Says on stderr where the report went, or, when it could not be written,
// puts the whole report there between markers, so nothing is lost if stderr
// is kept.
bool write_report(const Capture& c, bool announce);

// The watchdog's report, written by a thread other than the stuck owner
// from what the owner captured so far (which the owner is no longer
// changing: it is blocked).
void write_partial_report() {
  Capture* c = g_crash.capture;
  if (!c) return;
  c->errors.add(
      "watchdog: the capture was stuck; another thread wrote this report with what had been "
      "captured");
  if (sigsetjmp(t_recover, 1) == 0) {
    t_recover_armed = 1;
    diagnose(c);
    write_report(*c, true);
  }
  t_recover_armed = 0;
}

void announce_report(const Capture& c, bool written) {
  const Config& cfg = g_crash.config;
  if (written) {
    if (cfg.write_stderr) raw_log("faultline: report written to ", g_last_report, "\n");
    return;
  }
  raw_log("faultline: could not write the report to ", cfg.dir, ": ",
          strerrorname_np(g_write_errno));
  raw_log("\nfaultline: the report follows on stderr\n--- faultline report begin ---\n");
  int ignored = 0;
  write_json_report(c, cfg, 2, &ignored);
  raw_log("--- faultline report end ---\n");
}

bool write_report(const Capture& c, bool announce) {
  const Config& cfg = g_crash.config;
  char stamp[16];
  format_compact(stamp, c.time_sec);
  char name[128], tmp[160];
  StrBuf n(name, sizeof name);
  n.add("faultline-").add(stamp).add("-").add_dec(c.pid).add("-").add_dec(c.tid);
  // Live dumps can come many times a second from one thread: number them.
  static int sequence = 0;
  if (sequence > 0) n.add("-").add_dec(sequence);
  ++sequence;
  n.add(".json");
  StrBuf t(tmp, sizeof tmp);
  t.add(".").add(name).add(".tmp");

  int err = cfg.dir_fd < 0 ? cfg.dir_errno : 0;
  bool written = false;
  int dir_fd = cfg.dir_fd;
  if (dir_fd >= 0 && !fd_still(dir_fd, g_crash.dir_id)) {
    // The program closed our descriptor (daemons close all fds), or reused
    // its number for another file: open the directory again by its path.
    dir_fd = open(cfg.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) err = errno;
  }
  if (dir_fd >= 0) {
    int fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      err = errno;
    } else {
      g_phase = "writing the report";
      written = write_json_report(c, cfg, fd, &err);
      if (written && fsync(fd) != 0 && errno != EINVAL) {
        // fsync failing (EIO, ENOSPC on some filesystems) means the data may
        // not be there.
        err = errno;
        written = false;
      }
      close(fd);
      if (written && renameat(dir_fd, tmp, dir_fd, name) != 0) {
        err = errno;
        written = false;
      }
      if (!written) unlinkat(dir_fd, tmp, 0);
    }
    if (dir_fd != cfg.dir_fd) close(dir_fd);
  }
  if (written) {
    StrBuf last(g_last_report, sizeof g_last_report);
    last.add(cfg.dir).add("/").add(name);
  }
  g_write_errno = err;
  if (announce) announce_report(c, written);
  return written;
}

}  // namespace

namespace {

// The owner word: the owning thread's tid, with kDumpBit set while that
// owner takes a live dump. One atomic word, so a crash can never mistake a
// dump for another crash in the window between claiming and flagging.
constexpr pid_t kDumpBit = 0x40000000;  // tids are below 2^22

// A process-sent fatal signal that reached the owner of a live dump; raised
// again when the dump is done.
volatile int g_deferred_signal = 0;
siginfo_t g_deferred_info;  // as it came: the sender stays in the report

// Counts finished crash reports: threads that crashed meanwhile hand their
// own signals on when it moves.
volatile int g_report_gen = 0;

struct OwnerWork {
  int signo;
  siginfo_t* info;
  void* ucv;
  bool written;
};

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
  // abort() from our terminate handler (on this thread): an uncaught C++
  // exception.
  bool terminating = w->signo == SIGABRT && __atomic_load_n(&g_terminate.set, __ATOMIC_ACQUIRE) &&
                     g_terminate.tid == sys_gettid();
  capture_all(c, terminating ? "terminate" : "crash", w->signo, w->info, w->ucv);
  // The file first: stderr may be a dead or full pipe.
  int nobody = 0;
  if (!__atomic_compare_exchange_n(&g_writer, &nobody, 1, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return;  // the watchdog's stand-in is writing it
  }
  w->written = write_report(*c, /*announce=*/false);
  // torchrun's agent reads this file to name the root cause.
  g_phase = "torchelastic error file";
  write_torchelastic_error_file(*c, cfg.dir, w->written ? path_basename(g_last_report) : nullptr);
  // stderr last: it may be a pipe nobody reads (writes to it are bounded).
  if (cfg.write_stderr) {
    g_phase = "stderr summary";
    write_stderr_summary(*c, cfg);
  }
  if (cfg.write_stderr || !w->written) announce_report(*c, w->written);
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
  capture_all(c, "dump", w->signo, w->info, w->ucv);
  w->written = write_report(*c, /*announce=*/false);
  if (g_crash.config.write_stderr || !w->written) announce_report(*c, w->written);
}

void ignore_sigpipe(struct sigaction* old) {
  struct sigaction ign = {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  real_sigaction(SIGPIPE, &ign, old);
}

// Waits (bounded) for the crash owner to finish its report.
void wait_for_report(int gen, int limit_ms) {
  for (int waited = 0; waited < limit_ms && __atomic_load_n(&g_report_gen, __ATOMIC_ACQUIRE) == gen;
       waited += 5) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace

void crash_signal_handler(int signo, siginfo_t* info, void* ucv) {
  int saved_errno = errno;
  if (sys_getpid() != g_crash.pid) {
    // A vfork child (it shares our memory, and fork handlers did not run)
    // or a raw clone: touch nothing, die as without faultline.
    die_with_default(signo);
  }
  pid_t self = sys_gettid();
  bool from_kernel = !signal_sent_by_process(info->si_code);
  if (from_kernel && t_recover_armed) {
    // A fault inside one of our own steps on this thread (the owner's
    // capture, a thread unwinding itself, the watchdog's writer).
    t_recover_armed = 0;
    siglongjmp(t_recover, 1);
  }
  pid_t owner = __atomic_load_n(&g_owner, __ATOMIC_ACQUIRE);
  if ((owner & ~kDumpBit) == self) {
    if (!from_kernel) {
      // kill -ABRT from a supervisor landed on the thread writing a report.
      // A crash report: the process is ending anyway; let it finish. A live
      // dump: keep the signal and raise it again once the dump is done.
      if (owner & kDumpBit) {
        g_deferred_info = *info;
        g_deferred_signal = signo;
      }
      errno = saved_errno;
      return;
    }
    raw_log("faultline: fault inside the crash handler (", const_cast<const char*>(g_phase),
            "); no report\n");
    die_with_default(g_signo ? g_signo : signo);
  }
  const Config& cfg = g_crash.config;
  // How long a thread that crashed second waits for the first one's report:
  // past the watchdog's both stages (which end the process anyway).
  int limit_ms = cfg.watchdog_seconds > 0
                     ? (cfg.watchdog_seconds + kWatchdogGraceSeconds * 2 + 2) * 1000
                     : 60 * 1000;
  int report_gen = __atomic_load_n(&g_report_gen, __ATOMIC_ACQUIRE);
  for (int waited_ms = 0;; ++waited_ms) {
    pid_t expected = 0;
    if (__atomic_compare_exchange_n(&g_owner, &expected, self, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      break;
    }
    if ((expected & kDumpBit) && waited_ms < limit_ms) {
      // A live dump is being written: let it finish, then report the crash.
      struct timespec ts = {0, 1000 * 1000};
      nanosleep(&ts, nullptr);
      continue;
    }
    if (expected & kDumpBit) die_with_default(signo);  // the dump never ended
    // Another thread owns the crash: record ours for its report, leave our
    // crash context for its stack request, wait for the report, then hand
    // our own signal on as if faultline were not there.
    int slot = __atomic_fetch_add(&g_nsecondary, 1, __ATOMIC_ACQ_REL);
    if (slot < kMaxSecondary) {
      SecondaryCrash& sc = g_secondary[slot];
      sc.tid = self;
      sc.signo = signo;
      sc.code = info->si_code;
      sc.addr = reinterpret_cast<uintptr_t>(info->si_addr);
      sc.pc =
          ucv ? static_cast<uintptr_t>(static_cast<ucontext_t*>(ucv)->uc_mcontext.gregs[REG_RIP])
              : 0;
      __atomic_store_n(&sc.valid, 1, __ATOMIC_RELEASE);
    }
    note_secondary_crash(static_cast<ucontext_t*>(ucv));
    wait_for_report(report_gen, limit_ms);
    errno = saved_errno;
    chain(signo, info);
    return;
  }
  g_signo = signo;
  // A dead stderr pipe must not kill us with SIGPIPE: ignored, a write
  // just fails with EPIPE (and no signal stays pending for later).
  struct sigaction old_pipe;
  ignore_sigpipe(&old_pipe);
  arm_watchdog(cfg.watchdog_seconds);
  OwnerWork work = {signo, info, ucv, false};
  run_on_crash_stack(crash_work, &work);
  disarm_watchdog(cfg.watchdog_seconds);
  real_sigaction(SIGPIPE, &old_pipe, nullptr);
  __atomic_fetch_add(&g_report_gen, 1, __ATOMIC_ACQ_REL);
  errno = saved_errno;
  if (chain(signo, info)) {
    // The program's own handler runs next and may recover (a JIT, a
    // runtime): a later crash deserves its own report.
    g_signo = 0;
    g_writer = 0;
    __atomic_store_n(&g_owner, 0, __ATOMIC_RELEASE);
  }
  // Returning re-executes the faulting instruction under the restored
  // handler (or delivers the re-sent signal).
}

// A live dump: a report of every thread, then the process goes on.
void dump_signal_handler(int signo, siginfo_t* info, void* ucv) {
  int saved_errno = errno;
  if (sys_getpid() != g_crash.pid) return;
  pid_t self = sys_gettid();
  // A dump asked for while another is being written waits for it (this
  // thread still answers the other dump's stack request meanwhile); a crash
  // in progress wins.
  for (int waited_ms = 0;; ++waited_ms) {
    pid_t expected = 0;
    if (__atomic_compare_exchange_n(&g_owner, &expected, self | kDumpBit, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      break;
    }
    if (!(expected & kDumpBit) || (expected & ~kDumpBit) == self || waited_ms > 10000) {
      errno = saved_errno;
      return;
    }
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  g_signo = 0;
  struct sigaction old_pipe;
  ignore_sigpipe(&old_pipe);
  OwnerWork work = {signo, info, ucv, false};
  run_on_crash_stack(dump_work, &work);
  real_sigaction(SIGPIPE, &old_pipe, nullptr);
  g_dumps_written += work.written ? 1 : 0;
  // The process goes on: keep a descriptor in reserve again.
  int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int none = -1;
  if (spare >= 0) g_crash.reserved_id = fd_identity(spare);
  if (spare >= 0 && !__atomic_compare_exchange_n(&g_crash.reserved_fd, &none, spare, false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    close(spare);
  }
  __atomic_store_n(&g_owner, 0, __ATOMIC_RELEASE);
  if (g_crash.config.exit_after_dump && info->si_code == SI_TIMER) _exit(1);
  int deferred = __atomic_exchange_n(&g_deferred_signal, 0, __ATOMIC_ACQ_REL);
  if (deferred) {
    // Sent again to ourselves with its original siginfo (sender pid, si_code).
    siginfo_t si = g_deferred_info;
    if (syscall(SYS_rt_tgsigqueueinfo, sys_getpid(), self, deferred, &si) != 0) {
      syscall(SYS_tgkill, sys_getpid(), self, deferred);
    }
  }
  errno = saved_errno;
}

bool watchdog_fired() {
  return g_watchdog_stage != 0;
}

bool make_crash_stack() {
  if (g_crash_stack) return true;
  size_t page = 4096;
  void* p = mmap(nullptr, kCrashStackBytes + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) return false;
  mprotect(p, page, PROT_NONE);  // a guard page below it
  g_crash_stack = static_cast<char*>(p) + page;
  return true;
}

void reset_ownership_after_fork() {
  g_owner = 0;
  g_writer = 0;
  g_deferred_signal = 0;
  g_nsecondary = 0;
  g_signo = 0;
}

int dumps_written() {
  return g_dumps_written;
}
const char* last_report_path() {
  return g_last_report;
}

}  // namespace faultline::core
