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
#include "core/signals.h"
#include "core/str.h"
#include "core/time_fmt.h"
#include "core/unwind.h"

namespace faultline::core {

CrashState g_crash;

namespace {

// The thread that owns the crash; 0 while none does.
volatile pid_t g_owner = 0;
// Set while a capture phase runs: a fault inside it jumps back to the
// handler, which records the phase as failed and goes on with the next one.
sigjmp_buf g_recover;
volatile int g_recover_armed = 0;
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
  sigaction(signo, &dfl, nullptr);
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
  sigaction(SIGALRM, &sa, &g_old_alarm);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  alarm(static_cast<unsigned>(seconds));
}

void disarm_watchdog(int seconds) {
  if (seconds <= 0) return;
  alarm(0);
  sigaction(SIGALRM, &g_old_alarm, nullptr);
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
  sigaction(signo, &prev, nullptr);
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

// Runs one capture phase under the recovery point.
template <typename Fn>
void run_phase(const char* name, Capture* c, Fn fn) {
  g_phase = name;
  if (sigsetjmp(g_recover, 1) == 0) {
    g_recover_armed = 1;
    fn();
  } else {
    c->errors.add(name);  // the phase name says what was lost
  }
  g_recover_armed = 0;
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

void capture_all(Capture* c, int signo, siginfo_t* info, void* ucv) {
  Arena* arena = &g_crash.arena;
  const Config& cfg = g_crash.config;
  c->kind = "crash";
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
  c->threads = arena->alloc_array<ThreadCapture>(1);
  if (!c->modules.items || !c->threads) {
    c->errors.add("arena: too small for the module table");
    return;
  }
  run_phase("modules: fault while reading the link map", c,
            [&] { collect_modules(&c->modules, arena, &c->errors); });

  ThreadCapture* t = &c->threads[0];
  c->nthreads = 1;
  t->tid = c->tid;
  t->crashed = true;
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
  run_phase("symbols: fault while reading symbol tables", c,
            [&] { symbolize_threads(c->modules, c->threads, c->nthreads, arena, &c->errors); });
  run_phase("python: fault while walking the interpreter", c, [&] {
    capture_python(c->modules, arena, &c->python, kMaxThreads, cfg.max_frames, &c->errors);
  });
  run_phase("annotations: fault while copying annotations", c,
            [&] { capture_annotations(c, arena); });
  run_phase("diagnosis: fault while diagnosing", c, [&] { diagnose(c); });
}

// Creates the report: <dir>/.faultline-<...>.json.tmp, written, renamed.
// Falls back to writing the JSON on stderr when no file can be made.
void write_report(const Capture& c) {
  const Config& cfg = g_crash.config;
  char stamp[16];
  format_compact(stamp, c.time_sec);
  char name[128], tmp[160];
  StrBuf n(name, sizeof name);
  n.add("faultline-").add(stamp).add("-").add_dec(c.pid).add("-").add_dec(c.tid).add(".json");
  StrBuf t(tmp, sizeof tmp);
  t.add(".").add(name).add(".tmp");

  int err = cfg.dir_fd < 0 ? cfg.dir_errno : 0;
  bool written = false;
  if (cfg.dir_fd >= 0) {
    int fd = openat(cfg.dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
      if (written && renameat(cfg.dir_fd, tmp, cfg.dir_fd, name) != 0) {
        err = errno;
        written = false;
      }
      if (!written) unlinkat(cfg.dir_fd, tmp, 0);
    }
  }
  if (written) {
    if (cfg.write_stderr)
      raw_log("faultline: report written to ", cfg.dir, "/", name), raw_log("\n");
    return;
  }
  // No file: the whole report goes to stderr between markers, so nothing is
  // lost if stderr is kept.
  raw_log("faultline: could not write the report to ", cfg.dir, ": ", strerrorname_np(err));
  raw_log("\nfaultline: the report follows on stderr\n--- faultline report begin ---\n");
  int ignored = 0;
  write_json_report(c, cfg, 2, &ignored);
  raw_log("--- faultline report end ---\n");
}

}  // namespace

void crash_signal_handler(int signo, siginfo_t* info, void* ucv) {
  int saved_errno = errno;
  pid_t self = sys_gettid();
  pid_t expected = 0;
  if (!__atomic_compare_exchange_n(&g_owner, &expected, self, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    if (expected == self) {
      // A fault inside our own handler.
      if (g_recover_armed) {
        g_recover_armed = 0;
        siglongjmp(g_recover, 1);
      }
      raw_log("faultline: fault inside the crash handler (", const_cast<const char*>(g_phase),
              "); no report\n");
      die_with_default(g_signo ? g_signo : signo);
    }
    // Another thread owns the crash: wait for it to finish and end the
    // process. If it never does, the watchdog's bound applies here too.
    int waited_ms = 0;
    int limit_ms =
        (g_crash.config.watchdog_seconds > 0 ? g_crash.config.watchdog_seconds : 10) * 1000;
    while (waited_ms < limit_ms) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, nullptr);
      waited_ms += 10;
    }
    die_with_default(signo);
  }
  g_signo = signo;
  const Config& cfg = g_crash.config;
  arm_watchdog(cfg.watchdog_seconds);

  Capture* c = g_crash.capture;
  g_crash.arena.reset();
  // The Capture itself is the first arena allocation.
  c = static_cast<Capture*>(g_crash.arena.alloc(sizeof(Capture), alignof(Capture)));
  g_crash.capture = c;
  if (c) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c->start_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
    capture_all(c, signo, info, ucv);
    if (cfg.write_stderr) {
      g_phase = "stderr summary";
      write_stderr_summary(*c, cfg);
    }
    write_report(*c);
  } else {
    raw_log("faultline: no crash arena; no report\n");
  }
  disarm_watchdog(cfg.watchdog_seconds);
  errno = saved_errno;
  chain(signo, info);
  // Returning re-executes the faulting instruction under the restored
  // handler (or delivers the re-sent signal).
}

}  // namespace faultline::core
