// Install time: configuration, preparation and the handlers. Runs in normal
// program context (the preload constructor or faultline_install()), so it may
// use getenv and the like; none of it is reachable from the handler.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/base/raw_log.h"
#include "core/base/rt_signal.h"
#include "core/base/safe_read.h"
#include "core/base/sigaction_real.h"
#include "core/base/signals.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/base/thread_state.h"
#include "core/capture/altstacks.h"
#include "core/capture/annotations.h"
#include "core/capture/capture_all.h"
#include "core/capture/thread_signal.h"
#include "core/capture/threads.h"
#include "core/crash_state.h"
#include "core/diagnosis/classify.h"
#include "core/modules/module_snapshot.h"
#include "core/python/walker.h"
#include "core/signal/chain.h"
#include "core/signal/handler.h"
#include "core/terminate_record.h"
#include "core/unwind/unwind.h"
#include "core/unwind/unwind_with_cfi.h"
#include "core/write/report_file.h"
#include "core/write/torchelastic.h"
#include "faultline/faultline.h"
#include "install/libunwind_load.h"
#include "install/options.h"
#include "install/sigaction_hook.h"
#include "install/terminate.h"
#include "install/thread_stacks.h"

#ifndef FAULTLINE_VERSION
#define FAULTLINE_VERSION "0.0.0"
#endif

// Set by the dlopen hook (dlopen_hook.cpp) for a dlopen before the install.
extern "C" volatile int g_fl_dlopen_before_install;

namespace faultline::core {
namespace {

// 256 KiB alternate stack: the handler keeps its big buffers in static
// memory, but libunwind and the ELF reader still use tens of KiB.
constexpr size_t kAltStackBytes = 256u << 10;
void* g_altstack = nullptr;

constexpr int kDefaultMaxFrames = 256;
constexpr int kDefaultMaxThreads = 256;
timer_t g_dump_timer;
bool g_dump_timer_armed = false;
struct sigaction g_previous_dump;
int g_dump_signo = 0;

void install_dump_signal(int signo) {
  if (g_dump_signo == signo) return;
  if (g_dump_signo > 0) real_sigaction(g_dump_signo, &g_previous_dump, nullptr);
  g_dump_signo = 0;
  if (signo <= 0) return;
  struct sigaction sa = {};
  sa.sa_sigaction = dump_signal_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  if (real_sigaction(signo, &sa, &g_previous_dump) == 0) g_dump_signo = signo;
}

void arm_dump_timer(int seconds, int signo) {
  if (g_dump_timer_armed) {
    timer_delete(g_dump_timer);
    g_dump_timer_armed = false;
  }
  if (seconds <= 0 || signo <= 0) return;
  struct sigevent ev = {};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = signo;
  if (timer_create(CLOCK_MONOTONIC, &ev, &g_dump_timer) != 0) return;
  struct itimerspec its = {};
  its.it_value.tv_sec = seconds;
  g_dump_timer_armed = timer_settime(g_dump_timer, 0, &its, nullptr) == 0;
}

// After fork: the child is a new process with its own pid (its reports get
// their own names) and must not share the SafeReader's pipe with the parent.
void atfork_child() {
  g_crash.pid = sys_getpid();
  reset_ownership_after_fork();
  threads_reset_after_fork();
  safe_read_reset_after_fork();
  modules_reset_after_fork();
  thread_state_reset_after_fork();
  // The forking thread's signal stack, under its new id: one of faultline's
  // per-thread stacks, or the one install gave the installing thread.
  register_altstack_after_fork();
  if (sys_gettid() != g_crash.altstack_tid) {
    stack_t ss;
    if (sigaltstack(nullptr, &ss) == 0 && !(ss.ss_flags & SS_DISABLE) &&
        reinterpret_cast<uintptr_t>(ss.ss_sp) ==
            __atomic_load_n(&g_crash.altstack_lo, __ATOMIC_ACQUIRE)) {
      __atomic_store_n(&g_crash.altstack_tid, sys_gettid(), __ATOMIC_RELEASE);
    }
  }
  thread_annotations_after_fork();
  module_snapshot_after_fork();
}

constexpr int kDefaultWatchdogSeconds = 10;

void warn_bad(const char* var, const char* value, const char* why) {
  raw_log("faultline: ignoring ", var, "=", value ? value : "");
  raw_log(" (", why, "); using the default\n");
}

// Reads an integer variable within [lo, hi]; keeps *out on a bad value.
void env_int(const char* var, int64_t lo, int64_t hi, int64_t* out) {
  const char* v = secure_getenv(var);
  if (!v || !*v) return;
  int64_t n;
  if (!parse_int(v, &n)) return warn_bad(var, v, "not a whole number");
  if (n < lo || n > hi) return warn_bad(var, v, "out of range");
  *out = n;
}

void env_bool(const char* var, int* out) {
  const char* v = secure_getenv(var);
  if (!v || !*v) return;
  if (str_eq(v, "1") || str_eq(v, "yes") || str_eq(v, "true") || str_eq(v, "on")) {
    *out = 1;
  } else if (str_eq(v, "0") || str_eq(v, "no") || str_eq(v, "false") || str_eq(v, "off")) {
    *out = 0;
  } else {
    warn_bad(var, v, "expected 0 or 1");
  }
}

// Why parse_signal refused word: SIGRTMAX (64) is a signal, but past the
// 63 a setting holds (a bit each).
const char* unknown_signal_reason(const char* word) {
  int64_t n = 0;
  if ((parse_int(word, &n) && n == kRtSignalMax) || parse_rt_signal_name(word) == kRtSignalMax) {
    return "signal 64 (SIGRTMAX) cannot be used: settings take signals 1 to 63";
  }
  return "unknown signal";
}

// One signal by name or number; "0" means none.
void env_signal(const char* var, int* out) {
  const char* v = secure_getenv(var);
  if (!v || !*v) return;
  if (str_eq(v, "0")) {
    *out = 0;
    return;
  }
  int s = parse_signal(v);
  if (s == SIGKILL || s == SIGSTOP) return warn_bad(var, v, "this signal cannot be caught");
  if (s <= 0) return warn_bad(var, v, unknown_signal_reason(v));
  *out = s;
}

unsigned long long default_signals() {
  unsigned long long mask = 0;
  for (int i = 0; i < kFatalSignalCount; ++i) mask |= 1ull << kFatalSignals[i];
  return mask;
}

// "SEGV,ABRT" or "SIGSEGV ABRT 7". Unknown names make the whole value bad.
void env_signals(const char* var, unsigned long long* out) {
  const char* v = secure_getenv(var);
  if (!v || !*v) return;
  unsigned long long mask = 0;
  char word[32];
  size_t len = 0;
  for (const char* p = v;; ++p) {
    if (*p == ',' || *p == ' ' || *p == '\0') {
      if (len) {
        word[len] = '\0';
        int s = parse_signal(word);
        if (s == SIGKILL || s == SIGSTOP) {
          return warn_bad(var, v, "SIGKILL and SIGSTOP cannot be caught");
        }
        if (s <= 0) return warn_bad(var, v, unknown_signal_reason(word));
        mask |= 1ull << s;
        len = 0;
      }
      if (!*p) break;
    } else if (len + 1 < sizeof word) {
      word[len++] = *p;
    }
  }
  if (!mask) return warn_bad(var, v, "no signal named");
  *out = mask;
}

// Settings whose signals collide break faultline: a thread signal that is
// also a fatal one spins forever after the report; a dump signal that is
// fatal (or the thread signal) writes dumps in a loop or loses the other
// threads' stacks. The setting that was given is refused with a warning and
// its default kept.
void resolve_signal_conflicts(faultline_options* opts, int default_dump) {
  const int default_thread = SIGRTMAX - 3;
  auto in_signals = [&](int s) { return s > 0 && s < 64 && ((opts->signals >> s) & 1); };
  // SIGALRM is the watchdog's (a process-directed alarm during a crash's
  // capture, whose handler replaces the signal's for that time): as the
  // thread signal no thread could answer. (A live dump arms no watchdog: a
  // dump signal may be SIGALRM.)
  if (opts->watchdog_seconds > 0 && opts->thread_signal == SIGALRM) {
    warn_bad("FAULTLINE_THREAD_SIGNAL", secure_getenv("FAULTLINE_THREAD_SIGNAL"),
             "the watchdog uses it; FAULTLINE_WATCHDOG=0 turns the watchdog off");
    opts->thread_signal = default_thread;
  }
  // A handled signal that is the thread signal: whichever was set is wrong.
  if (in_signals(opts->thread_signal)) {
    if (opts->thread_signal != default_thread) {
      warn_bad("FAULTLINE_THREAD_SIGNAL", secure_getenv("FAULTLINE_THREAD_SIGNAL"),
               "it is one of the fatal signals handled");
      opts->thread_signal = default_thread;
    } else {
      warn_bad("FAULTLINE_SIGNALS", secure_getenv("FAULTLINE_SIGNALS"),
               "it includes the thread signal");
      opts->signals = default_signals();
    }
  }
  // A thread signal of 0 is none (only the crashing thread's stack), as a
  // dump signal of 0 is: two zeros do not collide. A thread signal that was
  // set to the dump signal goes back to its default; a dump signal set to
  // the default thread signal is refused below (FAULTLINE_SIGNALS is not
  // the culprit then, and is kept).
  if (opts->thread_signal > 0 && opts->thread_signal == opts->dump_signal &&
      opts->thread_signal != default_thread) {
    warn_bad("FAULTLINE_THREAD_SIGNAL", secure_getenv("FAULTLINE_THREAD_SIGNAL"),
             "it is the dump signal");
    opts->thread_signal = default_thread;
  }
  if (opts->dump_signal > 0 &&
      (in_signals(opts->dump_signal) || opts->dump_signal == opts->thread_signal)) {
    warn_bad("FAULTLINE_DUMP_SIGNAL", secure_getenv("FAULTLINE_DUMP_SIGNAL"),
             in_signals(opts->dump_signal) ? "it is one of the fatal signals handled"
                                           : "it is the thread signal");
    opts->dump_signal = default_dump;
  }
}

// FAULTLINE_SCRUB=0 keeps argv verbatim; FAULTLINE_SCRUB_KEYS adds words.
void read_scrub_settings(Config* cfg) {
  int scrub = 1;
  env_bool("FAULTLINE_SCRUB", &scrub);
  cfg->keep_secrets = scrub == 0;
  const char* keys = secure_getenv("FAULTLINE_SCRUB_KEYS");
  str_copy(cfg->scrub_keys, sizeof cfg->scrub_keys, keys ? keys : "");
}

void install_altstack() {
  stack_t current;
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE) &&
      current.ss_size >= kAltStackBytes) {
    return;  // someone already gave this thread a big enough one
  }
  // The install's stack is one thread's (usually the main thread's): a
  // second install from another thread keeps that thread's own stack (a
  // shared signal stack would be overwritten by two handlers at once).
  pid_t holder = __atomic_load_n(&g_crash.altstack_tid, __ATOMIC_ACQUIRE);
  if (g_altstack && holder != 0 && holder != sys_gettid()) return;
  if (!g_altstack) {
    // One guard page below the stack catches an overflow of the handler itself.
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, kAltStackBytes + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return;
    mprotect(p, page, PROT_NONE);
    g_altstack = static_cast<char*>(p) + page;
  }
  stack_t ss = {};
  ss.ss_sp = g_altstack;
  ss.ss_size = kAltStackBytes;
  if (sigaltstack(&ss, nullptr) == 0) {
    // hi = 0 first: a concurrent capture never mixes two ranges (see
    // altstack_prefault).
    uintptr_t lo = reinterpret_cast<uintptr_t>(ss.ss_sp);
    __atomic_store_n(&g_crash.altstack_hi, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&g_crash.altstack_tid, sys_gettid(), __ATOMIC_RELEASE);
    __atomic_store_n(&g_crash.altstack_lo, lo, __ATOMIC_RELEASE);
    __atomic_store_n(&g_crash.altstack_hi, lo + ss.ss_size, __ATOMIC_RELEASE);
  }
}

// True when `where` is the executable: its program headers (AT_PHDR) sit at
// the start of its first mapping. dladdr names it by argv[0].
bool is_main_object(const Dl_info& where) {
  uintptr_t phdr = getauxval(AT_PHDR);
  uintptr_t base = reinterpret_cast<uintptr_t>(where.dli_fbase);
  return phdr >= base && phdr - base < 65536;
}

void read_cmdline(Config* cfg) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, cfg->argv, sizeof cfg->argv - 1);
  // A full buffer with more to come: cut (the last argument may be cut
  // inside too); the report says so. Only the final NUL left over is not a
  // cut: the buffer ends with one of its own.
  char more[2];
  ssize_t extra = n == static_cast<ssize_t>(sizeof cfg->argv - 1) ? read(fd, more, 2) : 0;
  cfg->argv_truncated = extra > 1 || (extra == 1 && more[0] != '\0');
  close(fd);
  if (n > 0) {
    cfg->argv_len = static_cast<int>(n);
    cfg->argv[n] = '\0';
  }
}

// noinline: its 4 KiB realpath buffer stays in its own frame, not in
// install's for the whole install.
__attribute__((noinline)) void open_report_dir(Config* cfg, const char* dir) {
  if (!dir || !*dir) dir = ".";
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int open_errno = fd < 0 ? errno : 0;
  FdIdentity id = fd_identity(fd);
  if (cfg->dir_fd >= 0 && fd_still(cfg->dir_fd, g_crash.dir_id) && id.valid &&
      id.dev == g_crash.dir_id.dev && id.ino == g_crash.dir_id.ino) {
    // A second install naming the same directory (faultline.enable() after
    // the preload): the descriptor a crash on another thread may be using
    // right now stays as it is.
    close(fd);
    return;
  }
  // Another directory: the old descriptor is left open (one descriptor per
  // such install), so a report being written through it is not cut off.
  cfg->dir_fd = fd;
  cfg->dir_errno = open_errno;
  g_crash.dir_id = id;
  // Into a buffer of our own: realpath(dir, nullptr) would be the process's
  // first malloc in a C program (heap set-up at every start). On the stack,
  // whose pages the loader has touched already, not a page of .bss.
  char real[PATH_MAX];
  str_copy(cfg->dir, sizeof cfg->dir, realpath(dir, real) ? real : dir);
  if (cfg->dir_fd < 0) {
    raw_log("faultline: report directory ", dir, " cannot be opened: ", strerror(cfg->dir_errno));
    raw_log(cfg->write_stderr ? "; crash reports will go to stderr\n"
                              : "; crash reports will be lost (FAULTLINE_STDERR=0)\n");
  }
}

bool g_argv_from_constructor = false;

// The crash arena: the size asked for, else, where an address-space limit
// (ulimit -v, a batch system's memory limit as RLIMIT_AS) refuses it, the
// largest half of it down to 1 MiB: a capture in a small arena loses what
// does not fit and says so, one without an arena is no report at all. Either
// way said on stderr at start: the preload ignores what install returns, so
// a refused arena was crash reports off without a word.
bool init_arena(size_t want) {
  auto why = [](int e) {
    const char* name = strerrorname_np(e);
    return name ? name : "?";
  };
  int err = 0;
  for (size_t bytes = want; bytes >= (size_t{1} << 20); bytes /= 2) {
    if (g_crash.arena.init(bytes)) {
      if (bytes != want) {
        char msg[160];
        StrBuf m(msg, sizeof msg);
        m.add("faultline: the crash arena of ").add_dec(static_cast<int64_t>(want >> 20));
        m.add(" MiB could not be mapped (").add(why(err));
        m.add(", ulimit -v?); using ").add_dec(static_cast<int64_t>(bytes >> 20)).add(" MiB\n");
        raw_log(msg);
      }
      return true;
    }
    err = errno;
  }
  raw_log("faultline: no crash arena could be mapped (", why(err),
          ", ulimit -v?): crash reports are off\n");
  return false;
}

}  // namespace
}  // namespace faultline::core

using namespace faultline::core;

void faultline::install::options_defaults(faultline_options* opts) {
  *opts = faultline_options{};
  opts->size = sizeof *opts;
  // secure_getenv everywhere: under AT_SECURE (setuid, setgid, capabilities)
  // the caller's FAULTLINE_* variables are ignored (doc/security.md).
  opts->report_dir = secure_getenv("FAULTLINE_DIR");
  opts->signals = default_signals();
  opts->write_stderr = 1;
  opts->max_frames = kDefaultMaxFrames;
  opts->watchdog_seconds = kDefaultWatchdogSeconds;
  opts->arena_bytes = kDefaultArenaBytes;
  env_signals("FAULTLINE_SIGNALS", &opts->signals);
  env_bool("FAULTLINE_STDERR", &opts->write_stderr);
  int64_t v = opts->max_frames;
  env_int("FAULTLINE_MAX_FRAMES", 1, 10000, &v);
  opts->max_frames = static_cast<int>(v);
  v = opts->watchdog_seconds;
  env_int("FAULTLINE_WATCHDOG", 0, 3600, &v);
  opts->watchdog_seconds = static_cast<int>(v);
  v = static_cast<int64_t>(opts->arena_bytes >> 20);
  env_int("FAULTLINE_ARENA_MB", 1, 4096, &v);
  opts->arena_bytes = static_cast<size_t>(v) << 20;
  v = kDefaultMaxThreads;
  env_int("FAULTLINE_MAX_THREADS", 1, kMaxThreads - 1, &v);
  opts->max_threads = static_cast<int>(v);
  opts->thread_signal = SIGRTMAX - 3;
  env_signal("FAULTLINE_THREAD_SIGNAL", &opts->thread_signal);
  v = 1000;
  env_int("FAULTLINE_THREAD_TIMEOUT_MS", 10, 60000, &v);
  opts->thread_timeout_ms = static_cast<int>(v);
  int dump = 0;
  env_bool("FAULTLINE_DUMP", &dump);
  opts->dump_signal = dump ? SIGUSR2 : 0;
  env_signal("FAULTLINE_DUMP_SIGNAL", &opts->dump_signal);
  v = 0;
  env_int("FAULTLINE_DUMP_AFTER", 0, 365 * 86400, &v);
  opts->dump_after_seconds = static_cast<int>(v);
  env_bool("FAULTLINE_DUMP_AFTER_EXIT", &opts->exit_after_dump);
  opts->thread_altstacks = 1;
  env_bool("FAULTLINE_THREAD_ALTSTACKS", &opts->thread_altstacks);
  env_bool("FAULTLINE_STAY_IN_FRONT", &opts->stay_in_front);
  // Off by default: at 64 threads it adds about half to the capture time
  // (bench/minidump_bench.py, README); on where the minidump is wanted.
  opts->minidump = 0;
  env_bool("FAULTLINE_MINIDUMP", &opts->minidump);
  resolve_signal_conflicts(opts, dump ? SIGUSR2 : 0);
}

// Who runs first at a hardware fault when the program has its own handler
// behind faultline's (core/signal/chain.h). A deployment switch, like the unwinder.
static void read_chain_order(Config* cfg) {
  cfg->chain_order = ChainOrder::kAuto;
  const char* v = secure_getenv("FAULTLINE_CHAIN_ORDER");
  if (!v || !*v || !strcmp(v, "auto")) return;
  if (!strcmp(v, "report-first")) {
    cfg->chain_order = ChainOrder::kReportFirst;
  } else if (!strcmp(v, "handler-first")) {
    cfg->chain_order = ChainOrder::kHandlerFirst;
  } else {
    warn_bad("FAULTLINE_CHAIN_ORDER", v, "expected auto, report-first or handler-first");
  }
}

extern "C" {

// CPython's runtime state and the objects the walker checks pointers
// against, exported by every CPython build (the interpreter or libpython;
// Py_Version since 3.11). Weak: 0 in a process without them. Only their
// addresses are used: the loader binds them with the library's other
// relocations, in the scope dlsym(RTLD_DEFAULT) would search.
extern char _PyRuntime __attribute__((weak));
extern char Py_Version __attribute__((weak));
extern char PyCode_Type __attribute__((weak));
extern char PyBytes_Type __attribute__((weak));
extern char PyUnicode_Type __attribute__((weak));
// std::set_terminate, in the C++ runtime. Weak: 0 when no module in the
// global scope defines it. Only its address is used.
void _ZSt13set_terminatePFvvE() __attribute__((weak));
// glibc's registration of fork handlers, which pthread_atfork calls with
// the calling object's handle (unregistered when the object is unloaded).
int __register_atfork(void (*prepare)(), void (*parent)(), void (*child)(), void* dso_handle);
extern void* __dso_handle __attribute__((visibility("hidden")));

int faultline_install(const faultline_options* caller) {
  // The caller's struct in this library's layout (install/options.h).
  faultline_options own;
  if (int rc = faultline::install::options_from_caller(caller, &own); rc != 0) return rc;
  const faultline_options* opts = &own;
  resolve_real_sigaction();  // before any handler is installed
  Config* cfg = &g_crash.config;
  // CrashState is all zeros until here (in .bss: its pages cost nothing
  // until written, and one fault each, not a read and a copy-on-write).
  static bool installed_before = false;
  bool first = !installed_before;
  if (first) {
    installed_before = true;
    for (int& fd : g_crash.reserved_fd) fd = -1;
  }
  if (!g_crash.installed) cfg->dir_fd = -1;
  // A second install (enable() after the preload, the C API twice) keeps the
  // arena it finds: a crash or a live dump on another thread may be writing
  // into it right now, so it is never unmapped or mapped again.
  if (g_crash.arena.capacity() == 0 && !init_arena(opts->arena_bytes)) return -ENOMEM;
  modules_init();
  // The unwinder is not an option of the C API: a deployment switch. Only
  // the choices that use libunwind load it.
  if (const char* u = secure_getenv("FAULTLINE_UNWINDER"); u && *u) {
    if (!unwinder_choose(u)) {
      warn_bad("FAULTLINE_UNWINDER", u, "expected cfi, cfi+libunwind or libunwind");
    } else if (const char* why = ""; unwinder_choice() != UnwinderChoice::kCfi &&
                                     !faultline::install::libunwind_load(&why)) {
      raw_log("faultline: FAULTLINE_UNWINDER=", u, ": libunwind could not be loaded (");
      raw_log(why, "); using the CFI unwinder\n");
    }
  }
  read_chain_order(cfg);
  // Weak references (above): no failed dlsym in every C program (it formats
  // an error with malloc, ~70 us of start-up on a small VM), and in Python
  // no module snapshot and no symbol-table reads at start (~0.4 ms): the
  // snapshot waits for the first dlopen or pthread_create, as elsewhere.
  Dl_info where = {};
  if (&_PyRuntime != nullptr && dladdr(&_PyRuntime, &where) && where.dli_fbase) {
    PythonExports e = {};
    // The executable is named by argv[0]; its real path says 3.9/3.10's
    // version where Py_Version does not exist.
    e.path = where.dli_fname && strchr(where.dli_fname, '/') && !is_main_object(where)
                 ? where.dli_fname
                 : modules_exe_path();
    e.module_base = reinterpret_cast<uintptr_t>(where.dli_fbase);
    e.runtime = reinterpret_cast<uintptr_t>(&_PyRuntime);
    e.py_version = reinterpret_cast<uintptr_t>(&Py_Version);
    e.code_type = reinterpret_cast<uintptr_t>(&PyCode_Type);
    e.bytes_type = reinterpret_cast<uintptr_t>(&PyBytes_Type);
    e.unicode_type = reinterpret_cast<uintptr_t>(&PyUnicode_Type);
    python_init_exports(e);
  }
  // Else no exported CPython runtime (every CPython build exports it): no
  // interpreter to look for now. One loaded later, or hidden in a local
  // scope, is found at crash time.
  // The first install leaves what is unset alone: those globals are zeros
  // already, and even reading one is a page fault at start.
  classify_init(first);
  torchelastic_init(first);
  cfg->write_stderr = opts->write_stderr != 0;
  open_report_dir(cfg, opts->report_dir);
  stderr_remember();
  read_scrub_settings(cfg);
  cfg->write_stderr = opts->write_stderr != 0;
  cfg->max_frames = opts->max_frames > 0 ? opts->max_frames : kDefaultMaxFrames;
  cfg->watchdog_seconds = opts->watchdog_seconds;
  cfg->arena_bytes = g_crash.arena.capacity();
  cfg->signals = opts->signals;
  cfg->max_threads = opts->max_threads > 0 ? opts->max_threads : kDefaultMaxThreads;
  cfg->thread_signal = opts->thread_signal;
  // The C API's options too (the environment's were checked with a
  // warning): SIGALRM is the watchdog's during a crash, no thread could
  // answer on it.
  if (cfg->thread_signal == SIGALRM && opts->watchdog_seconds > 0) {
    raw_log("faultline: the thread signal cannot be SIGALRM while the watchdog is on; using ");
    raw_log("SIGRTMAX-3\n");
    cfg->thread_signal = SIGRTMAX - 3;
  }
  cfg->thread_timeout_ms = opts->thread_timeout_ms > 0 ? opts->thread_timeout_ms : 1000;
  cfg->exit_after_dump = opts->exit_after_dump != 0;
  cfg->minidump = opts->minidump != 0;
  cfg->callback = opts->callback;
  cfg->callback_data = opts->callback_data;
  int dump_signo = opts->dump_signal;
  if (opts->dump_after_seconds > 0 && dump_signo <= 0) dump_signo = SIGUSR2;
  // A dump signal that is also fatal or the thread signal would loop (the
  // environment's settings were checked with a warning; this covers the API).
  if (dump_signo > 0 && dump_signo < 64 &&
      (((opts->signals >> dump_signo) & 1) || dump_signo == opts->thread_signal)) {
    dump_signo = 0;
  }
  cfg->dump_signal = dump_signo;
  g_crash.pid = sys_getpid();
  static bool atfork_done = false;
  if (!atfork_done) {
    // What pthread_atfork does (it is a stub linked into each library from
    // libc_nonshared.a), called directly: the stub sits at the end of this
    // library's text, a page fault of its own at every start-up.
    atfork_done = __register_atfork(module_snapshot_before_fork, module_snapshot_after_fork_parent,
                                    atfork_child, &__dso_handle) == 0;
  }
  reserve_fds();
  threads_init(cfg->thread_signal);
  if (dump_signo > 0 || !first) {
    install_dump_signal(dump_signo);
    arm_dump_timer(opts->dump_after_seconds, dump_signo);
  }
  set_thread_altstacks(opts->thread_altstacks != 0);
  // At the preload's install, unless a library's constructor called dlopen
  // before it, every loaded module is in the global scope, so the weak
  // reference says whether the C++ runtime is there, without a walk of the
  // modules under the loader's lock. One loaded later is hooked at the next
  // thread start (thread_stacks.cpp), as before.
  bool scope_is_global = first && g_argv_from_constructor && !g_fl_dlopen_before_install;
  if (!scope_is_global || &_ZSt13set_terminatePFvvE != nullptr) {
    install_terminate_handler();
  }
  g_stay_in_front = opts->stay_in_front != 0;
  if (!g_argv_from_constructor) read_cmdline(cfg);
  if (cfg->start_sec == 0) {
    // The system call, not the vDSO: a program's first clock_gettime
    // through the vDSO faults in libc's page and the vDSO's two data pages
    // (~35 us of a C program's start on a virtual machine; this is ~1 us).
    // The vDSO where the call is refused (a seccomp filter written for
    // programs that never make it).
    struct timespec ts = {};
    if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) != 0) clock_gettime(CLOCK_REALTIME, &ts);
    cfg->start_sec = ts.tv_sec;
    cfg->start_nsec = ts.tv_nsec;
  }
  install_altstack();

  struct sigaction sa = {};
  sa.sa_sigaction = crash_signal_handler;
  sigemptyset(&sa.sa_mask);
  // SA_NODEFER: a fault inside the handler reaches the handler again (which
  // recovers) instead of killing the process with no report.
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  for (int s = 1; s < 64; ++s) {
    bool want = (cfg->signals >> s) & 1;
    if (want && !g_crash.handled[s]) {
      if (real_sigaction(s, &sa, &g_crash.previous[s]) == 0) {
        g_crash.earlier[s] = handler_fn(g_crash.previous[s]);
        g_crash.previous_later[s] = false;
        g_crash.handled[s] = true;
      }
    } else if (!want && g_crash.handled[s]) {
      real_sigaction(s, &g_crash.previous[s], nullptr);
      g_crash.handled[s] = false;
    }
  }
  g_crash.installed = true;
  return 0;
}

void faultline_uninstall(void) {
  g_stay_in_front = 0;
  arm_dump_timer(0, 0);
  install_dump_signal(0);
  threads_uninstall();
  set_thread_altstacks(false);
  uninstall_terminate_handler();
  for (int s = 1; s < 64; ++s) {
    if (g_crash.handled[s]) {
      real_sigaction(s, &g_crash.previous[s], nullptr);
      g_crash.handled[s] = false;
    }
  }
  g_crash.installed = false;
}

int faultline_installed(void) {
  return g_crash.installed ? 1 : 0;
}

const char* faultline_version(void) {
  return FAULTLINE_VERSION;
}

int faultline_dump_now(void) {
  if (!g_crash.installed) return -ENOTCONN;
  int before = dumps_written();
  if (g_dump_signo > 0) {
    // Delivered to this thread before tgkill returns.
    syscall(SYS_tgkill, g_crash.pid, sys_gettid(), g_dump_signo);
  } else {
    siginfo_t si = {};
    si.si_signo = SIGUSR2;
    si.si_code = SI_USER;
    si.si_pid = g_crash.pid;
    ucontext_t uc;
    getcontext(&uc);
    dump_signal_handler(SIGUSR2, &si, &uc);
  }
  return dumps_written() > before ? 0 : -EIO;
}

size_t faultline_last_report(char* buf, size_t size) {
  if (!buf || size == 0) return 0;
  return str_copy(buf, size, last_report_path());
}

}  // extern "C"

namespace {

// The file name part of a path.
const char* base_name(const char* path, size_t len, size_t* base_len) {
  size_t start = len;
  while (start > 0 && path[start - 1] != '/') --start;
  *base_len = len - start;
  return path + start;
}

// True when an LD_PRELOAD entry names this library: its file name, or the
// same file by device and inode (a copy or link under another name).
bool named_in(const char* p, const Dl_info& info) {
  size_t self_len = 0;
  const char* self = base_name(info.dli_fname, strlen(info.dli_fname), &self_len);
  struct stat self_st;
  bool have_st = stat(info.dli_fname, &self_st) == 0;
  // Entries are separated by spaces or colons (ld.so(8)); in
  // /etc/ld.so.preload by any white space.
  for (const char* e = p; *e;) {
    size_t len = strcspn(e, " :\t\n");
    size_t entry_base_len = 0;
    const char* entry_base = base_name(e, len, &entry_base_len);
    if (len > 0 && entry_base_len == self_len && memcmp(entry_base, self, self_len) == 0) {
      return true;
    }
    char path[PATH_MAX];
    struct stat st;
    if (have_st && len > 0 && len < sizeof path && memchr(e, '/', len)) {
      memcpy(path, e, len);
      path[len] = '\0';
      if (stat(path, &st) == 0 && st.st_dev == self_st.st_dev && st.st_ino == self_st.st_ino) {
        return true;
      }
    }
    e += len;
    while (*e == ' ' || *e == ':' || *e == '\t' || *e == '\n') ++e;
  }
  return false;
}

// Where the loader placed this library: the objects it preloads
// (LD_PRELOAD, /etc/ld.so.preload, ld.so --preload) come right after the
// executable and the vDSO, before the executable's own DT_NEEDED libraries;
// a linked library comes among or after those, a dlopened one at the end.
enum class Placed { kUndecided, kPreloaded, kAfterNeeded, kLinked };
struct LinkOrder {
  uintptr_t self;          // an address in this library's code
  const char* needed[64];  // the executable's DT_NEEDED names
  int nneeded;
  bool needed_seen;  // one of them is before us
  Placed verdict;
};

int link_order_step(struct dl_phdr_info* info, size_t, void* data) {
  LinkOrder* o = static_cast<LinkOrder*>(data);
  uintptr_t lo = UINTPTR_MAX, hi = 0, dyn = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      lo = ph.p_vaddr < lo ? ph.p_vaddr : lo;
      hi = ph.p_vaddr + ph.p_memsz > hi ? ph.p_vaddr + ph.p_memsz : hi;
    } else if (ph.p_type == PT_DYNAMIC) {
      dyn = info->dlpi_addr + ph.p_vaddr;
    }
  }
  if (lo >= hi) return 0;
  uintptr_t start = info->dlpi_addr + lo, end = info->dlpi_addr + hi;
  if (o->nneeded < 0) {  // the first object: the executable
    o->nneeded = 0;
    if (!dyn) return 1;
    uintptr_t strtab = 0;
    uint64_t needed[64];
    int n = 0;
    for (const ElfW(Dyn)* d = reinterpret_cast<const ElfW(Dyn)*>(dyn); d->d_tag != DT_NULL; ++d) {
      if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
      if (d->d_tag == DT_NEEDED && n < 64) needed[n++] = d->d_un.d_val;
    }
    // The loader may have rewritten the pointer to a runtime address.
    if (strtab && (strtab < start || strtab >= end)) strtab += info->dlpi_addr;
    if (!strtab || strtab < start || strtab >= end) return 1;
    for (int k = 0; k < n; ++k)
      o->needed[o->nneeded++] = reinterpret_cast<const char*>(strtab + needed[k]);
    return 0;
  }
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  size_t base_len = 0;
  const char* base = base_name(name, strlen(name), &base_len);
  bool needed = false;
  for (int k = 0; k < o->nneeded && !needed; ++k) {
    size_t need_len = 0;
    const char* need = base_name(o->needed[k], strlen(o->needed[k]), &need_len);
    needed = need_len == base_len && memcmp(need, base, base_len) == 0;
  }
  if (start <= o->self && o->self < end) {
    // Linked (the executable needs it, maybe first), or after what it
    // needs (dlopened, linked through another library, or preloaded after
    // another preload that the executable also needs).
    o->verdict = needed           ? Placed::kLinked
                 : o->needed_seen ? Placed::kAfterNeeded
                                  : Placed::kPreloaded;
    return 1;
  }
  o->needed_seen = o->needed_seen || needed;
  return 0;
}

Placed placed() {
  LinkOrder o = {};
  o.self = reinterpret_cast<uintptr_t>(&base_name);
  o.nneeded = -1;
  dl_iterate_phdr(link_order_step, &o);
  return o.nneeded > 0 ? o.verdict : Placed::kUndecided;
}

// /etc/ld.so.preload names this library (under any file name).
bool named_in_preload_file(const Dl_info& info) {
  int fd = open("/etc/ld.so.preload", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return strstr(buf, "libfaultline") || named_in(buf, info);
}

// True when this library was preloaded (as opposed to linked or dlopened):
// "libfaultline" in LD_PRELOAD (the quick check, every preloaded start),
// else an LD_PRELOAD entry naming it under another name, else its place in
// the loader's list (/etc/ld.so.preload, ld.so --preload).
bool preloaded() {
  const char* p = getenv("LD_PRELOAD");
  if (p && strstr(p, "libfaultline")) return true;
  // A setuid or file-capability program: the loader ignored LD_PRELOAD,
  // and a system-wide preload must not give its caller a report of a
  // privileged process (its registers, its address layout).
  if (getauxval(AT_SECURE)) return false;
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&base_name), &info) || !info.dli_fname) return false;
  size_t self_len = 0;
  const char* self = base_name(info.dli_fname, strlen(info.dli_fname), &self_len);
  // Under its own name an entry naming it would have said so above.
  if (p && *p && !strstr(self, "libfaultline") && named_in(p, info)) return true;
  switch (placed()) {
    case Placed::kPreloaded:
      return true;
    case Placed::kAfterNeeded:
      // An earlier preload the executable also needs (libstdc++ preloaded
      // by LD_PRELOAD) puts a system-wide preload after it.
      return named_in_preload_file(info);
    default:
      return false;
  }
}

// The preload entry point. glibc passes (argc, argv, envp) to constructors.
__attribute__((constructor)) void faultline_preload_init(int argc, char** argv, char**) {
  if (!preloaded()) return;
  int off = 0;
  env_bool("FAULTLINE_DISABLE", &off);
  if (off) return;
  Config* cfg = &g_crash.config;
  int len = 0;
  for (int i = 0; argv && i < argc; ++i) {
    size_t n = str_len(argv[i]);
    if (len + static_cast<int>(n) + 1 > static_cast<int>(sizeof cfg->argv)) {
      cfg->argv_truncated = true;  // the arguments that fit, whole; the report says the rest
      break;
    }
    memcpy(cfg->argv + len, argv[i], n + 1);
    len += static_cast<int>(n) + 1;
  }
  if (argv) {
    cfg->argv_len = len;
    faultline::core::g_argv_from_constructor = true;
  }
  faultline_install(nullptr);
}

}  // namespace
