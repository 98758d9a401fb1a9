// The fatal-signal handler. Runs on the alternate signal stack, possibly with
// the heap corrupt and locks held by the thread that died. Everything it
// touches was prepared at install (install.cpp); see DESIGN.md for the rules.
//
// Order: claim the crash (one CAS on the thread id), arm the watchdog,
// capture into the arena, print the stderr summary, write the report under a
// temporary name and rename it, then hand the signal on.
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
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
SigactionFn g_real_sigaction = nullptr;  // set at install (sigaction_hook.cpp)
TerminateInfo g_terminate;               // filled by the terminate handler (terminate.cpp)
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
volatile int g_owner_is_dump = 0;
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

void watchdog_expired(int) {
  raw_log("faultline: the crash handler ran too long (watchdog); giving up in phase ",
          const_cast<const char*>(g_phase), "\n");
  die_with_default(g_signo ? g_signo : SIGABRT);
}

void arm_watchdog(int seconds) {
  if (seconds <= 0) return;
  struct sigaction sa = {};
  sa.sa_handler = watchdog_expired;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_ONSTACK;
  real_sigaction(SIGALRM, &sa, &g_old_alarm);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  alarm(static_cast<unsigned>(seconds));
}

void disarm_watchdog(int seconds) {
  if (seconds <= 0) return;
  alarm(0);
  real_sigaction(SIGALRM, &g_old_alarm, nullptr);
}

// Hands the signal on: restore the handler that was there before us (or the
// default) and make the signal happen again where it first happened, so a
// core file shows the crash and not our handler. A hardware fault recurs by
// itself when the faulting instruction re-executes on return. A signal that
// would not recur (sent by a process: abort, kill; or a trap, whose pc is
// already past the int3) is re-sent to this thread while blocked here, and
// is delivered when the return restores the interrupted context's mask.
void chain(int signo, siginfo_t* info) {
  struct sigaction prev = g_crash.previous[signo];
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
  if (sigsetjmp(t_recover, 1) == 0) {
    t_recover_armed = 1;
    fn();
  } else {
    c->errors.add(name);  // the phase name says what was lost
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
bool write_report(const Capture& c) {
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
    if (cfg.write_stderr) raw_log("faultline: report written to ", g_last_report, "\n");
    return true;
  }
  // No file: the whole report goes to stderr between markers, so nothing is
  // lost if stderr is kept.
  raw_log("faultline: could not write the report to ", cfg.dir, ": ", strerrorname_np(err));
  raw_log("\nfaultline: the report follows on stderr\n--- faultline report begin ---\n");
  int ignored = 0;
  write_json_report(c, cfg, 2, &ignored);
  raw_log("--- faultline report end ---\n");
  return false;
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
  if (t_recover_armed) {
    // A fault inside one of our own capture steps on this thread.
    t_recover_armed = 0;
    siglongjmp(t_recover, 1);
  }
  pid_t expected = 0;
  for (;;) {
    if (__atomic_compare_exchange_n(&g_owner, &expected, self, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      break;
    }
    if (expected == self) {
      raw_log("faultline: fault inside the crash handler (", const_cast<const char*>(g_phase),
              "); no report\n");
      die_with_default(g_signo ? g_signo : signo);
    }
    if (g_owner_is_dump) {
      // A live dump is being written: let it finish, then report the crash.
      struct timespec ts = {0, 1000 * 1000};
      nanosleep(&ts, nullptr);
      expected = 0;
      continue;
    }
    // Another thread owns the crash: record ours for its report, leave our
    // crash context for its stack request, and wait for the process to end.
    int slot = __atomic_fetch_add(&g_nsecondary, 1, __ATOMIC_ACQ_REL);
    if (slot < kMaxSecondary) {
      SecondaryCrash& s = g_secondary[slot];
      s.tid = self;
      s.signo = signo;
      s.code = info->si_code;
      s.addr = reinterpret_cast<uintptr_t>(info->si_addr);
      s.pc = ucv ? static_cast<uintptr_t>(static_cast<ucontext_t*>(ucv)->uc_mcontext.gregs[REG_RIP])
                 : 0;
      __atomic_store_n(&s.valid, 1, __ATOMIC_RELEASE);
    }
    note_secondary_crash(static_cast<ucontext_t*>(ucv));
    int limit_ms =
        (g_crash.config.watchdog_seconds > 0 ? g_crash.config.watchdog_seconds : 10) * 1000;
    for (int waited = 0; waited < limit_ms; waited += 10) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
    die_with_default(signo);
  }
  g_signo = signo;
  const Config& cfg = g_crash.config;
  arm_watchdog(cfg.watchdog_seconds);
  Capture* c = begin_capture();
  if (c) {
    // abort() from our terminate handler: an uncaught C++ exception.
    bool terminating = signo == SIGABRT && __atomic_load_n(&g_terminate.set, __ATOMIC_ACQUIRE);
    capture_all(c, terminating ? "terminate" : "crash", signo, info, ucv);
    if (cfg.write_stderr) {
      g_phase = "stderr summary";
      write_stderr_summary(*c, cfg);
    }
    bool written = write_report(*c);
    // torchrun's agent reads this file to name the root cause.
    g_phase = "torchelastic error file";
    write_torchelastic_error_file(*c, cfg.dir, written ? path_basename(g_last_report) : nullptr);
  } else {
    raw_log("faultline: no crash arena; no report\n");
  }
  disarm_watchdog(cfg.watchdog_seconds);
  errno = saved_errno;
  chain(signo, info);
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
    if (__atomic_compare_exchange_n(&g_owner, &expected, self, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      break;
    }
    if (!g_owner_is_dump || expected == self || waited_ms > 10000) {
      errno = saved_errno;
      return;
    }
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  g_owner_is_dump = 1;
  Capture* c = begin_capture();
  bool ok = false;
  if (c) {
    capture_all(c, "dump", signo, info, ucv);
    c->dump_ok = true;
    ok = write_report(*c);
  }
  g_dumps_written += ok ? 1 : 0;
  // The process goes on: keep a descriptor in reserve again.
  int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int none = -1;
  if (spare >= 0) g_crash.reserved_id = fd_identity(spare);
  if (spare >= 0 && !__atomic_compare_exchange_n(&g_crash.reserved_fd, &none, spare, false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    close(spare);
  }
  g_owner_is_dump = 0;
  __atomic_store_n(&g_owner, 0, __ATOMIC_RELEASE);
  if (g_crash.config.exit_after_dump && info->si_code == SI_TIMER) _exit(1);
  errno = saved_errno;
}

int dumps_written() {
  return g_dumps_written;
}
const char* last_report_path() {
  return g_last_report;
}

}  // namespace faultline::core
