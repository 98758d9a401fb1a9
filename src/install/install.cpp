// faultline_install: configuration, preparation and the handlers, in the
// steps below, in the order they run. Runs in normal program context (the
// preload's constructor, preload.cpp, or the C API), so it may use getenv
// and the like; none of it is reachable from the handler. The environment
// is read in options.cpp, the rest of the C API is in api.cpp.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
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
#include "core/signal/chain_call.h"
#include "core/signal/crash_stack.h"
#include "core/signal/handler.h"
#include "core/signal/shutdown.h"
#include "core/terminate_record.h"
#include "core/unwind/unwind.h"
#include "core/unwind/unwind_with_cfi.h"
#include "core/write/job_identity.h"
#include "core/write/report_file.h"
#include "core/write/torchelastic.h"
#include "faultline/faultline.h"
#include "install/cmdline.h"
#include "install/crash_arena.h"
#include "install/dump_helper.h"
#include "install/dump_later.h"
#include "install/dump_signal.h"
#include "install/job_parent.h"
#include "install/libunwind_load.h"
#include "install/main_altstack.h"
#include "install/module_snapshot_refresh.h"
#include "install/options.h"
#include "install/seccomp_filter.h"
#include "install/sigaction_hook.h"
#include "install/terminate.h"
#include "install/thread_stacks.h"

// Set by the dlopen hook (dlopen_hook.cpp) for a dlopen before the install.
extern "C" volatile int g_fl_dlopen_before_install;

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

}  // extern "C"

namespace faultline::core {
namespace {

using install::kDefaultMaxFrames;
using install::kDefaultMaxThreads;
using install::read_chain_order;
using install::read_crash_limits;
using install::read_scrub_settings;
using install::warn_bad;

// After fork: the child is a new process with its own pid (its reports get
// their own names) and must not share the SafeReader's pipe with the parent.
void atfork_child() {
  // A fork child is never the rank: its SIGTERM is the program's alone.
  // First: until the new pid is recorded, the handler writes no report.
  g_crash.config.signals &= ~shutdown_after_fork();
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
  dump_later_after_fork();
}

// True when `where` is the executable: its program headers (AT_PHDR) sit at
// the start of its first mapping. dladdr names it by argv[0].
bool is_main_object(const Dl_info& where) {
  uintptr_t phdr = getauxval(AT_PHDR);
  uintptr_t base = reinterpret_cast<uintptr_t>(where.dli_fbase);
  return phdr >= base && phdr - base < 65536;
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

// First install or a later one (faultline.enable() after the preload, the
// C API twice). CrashState is all zeros until here (in .bss: its pages cost
// nothing until written, and one fault each, not a read and a
// copy-on-write), so only the first sets what is not zero when unset.
bool begin_install(Config* cfg) {
  static bool installed_before = false;
  bool first = !installed_before;
  if (first) {
    installed_before = true;
    for (int& fd : g_crash.reserved_fd) fd = -1;
  }
  if (!g_crash.installed) cfg->dir_fd = -1;
  return first;
}

// The unwinder is not an option of the C API: a deployment switch. Only
// the choices that use libunwind load it.
void choose_unwinder() {
  if (const char* u = secure_getenv("FAULTLINE_UNWINDER"); u && *u) {
    if (!unwinder_choose(u)) {
      warn_bad("FAULTLINE_UNWINDER", u, "expected cfi, cfi+libunwind or libunwind");
    } else if (const char* why = ""; unwinder_choice() != UnwinderChoice::kCfi &&
                                     !faultline::install::libunwind_load(&why)) {
      raw_log("faultline: FAULTLINE_UNWINDER=", u, ": libunwind could not be loaded (");
      raw_log(why, "); using the CFI unwinder\n");
    }
  }
}

// Weak references (above): no failed dlsym in every C program (it formats
// an error with malloc, ~70 us of start-up on a small VM), and in Python
// no module snapshot and no symbol-table reads at start (~0.4 ms): the
// snapshot waits for the first dlopen or pthread_create, as elsewhere.
void find_python_runtime() {
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
}

// The options the handler reads, copied into the config it reads them
// from; a zero of the C API is the default.
void copy_options(Config* cfg, const faultline_options* opts) {
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
  cfg->minidump = opts->minidump != 0;
  cfg->callback = opts->callback;
  cfg->callback_data = opts->callback_data;
}

// The dump signal asked for, or 0 (a timed dump needs none: dump_later.h).
// A dump signal that is also fatal or the thread signal would loop (the
// environment's settings were checked with a warning; this covers the API).
int choose_dump_signal(const faultline_options* opts) {
  int dump_signo = opts->dump_signal;
  if (dump_signo > 0 && dump_signo < 64 &&
      (((opts->signals >> dump_signo) & 1) || dump_signo == opts->thread_signal)) {
    dump_signo = 0;
  }
  return dump_signo;
}

// Once per process: the module snapshot's lock around fork, and the child's
// new pid and fresh per-process state (atfork_child).
void register_fork_handlers() {
  static bool atfork_done = false;
  if (!atfork_done) {
    // What pthread_atfork does (it is a stub linked into each library from
    // libc_nonshared.a), called directly: the stub sits at the end of this
    // library's text, a page fault of its own at every start-up.
    atfork_done = __register_atfork(module_snapshot_before_fork, module_snapshot_after_fork_parent,
                                    atfork_child, &__dso_handle) == 0;
  }
}

// The std::terminate hook, where there is a C++ runtime to hook or may be.
// At the preload's install, unless a library's constructor called dlopen
// before it, every loaded module is in the global scope, so the weak
// reference says whether the C++ runtime is there, without a walk of the
// modules under the loader's lock. One loaded later is hooked at the next
// thread start (thread_stacks.cpp), as before.
void hook_terminate(bool first) {
  bool scope_is_global = first && g_argv_from_constructor && !g_fl_dlopen_before_install;
  if (!scope_is_global || &_ZSt13set_terminatePFvvE != nullptr) {
    install_terminate_handler();
  }
}

// The process's start time for the report (its uptime at the crash), taken
// at the first install.
void record_start_time(Config* cfg) {
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
}

// Last: the crash handler on each signal asked for (remembering the
// program's handler to chain to), and the signals no longer asked for given
// back to theirs.
void install_crash_handlers(const Config* cfg) {
  struct sigaction sa = {};
  sa.sa_sigaction = crash_signal_handler;
  sigemptyset(&sa.sa_mask);
  // SA_NODEFER: a fault inside the handler reaches the handler again (which
  // recovers) instead of killing the process with no report.
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  for (int s = 1; s < 64; ++s) {
    bool want = (cfg->signals >> s) & 1;
    if (want && !g_crash.handled[s]) {
      struct sigaction cur;
      // A shutdown signal the process inherited as ignored stays ignored:
      // a handler would interrupt system calls and be lost across exec.
      if (is_shutdown(s) && real_sigaction(s, nullptr, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
          cur.sa_handler == SIG_IGN) {
        continue;
      }
      if (real_sigaction(s, &sa, &g_crash.previous[s]) == 0) {
        g_crash.handled[s] = true;
        if (is_shutdown(s)) restart_like_program(s);
      }
    } else if (!want && g_crash.handled[s]) {
      real_sigaction(s, &g_crash.previous[s], nullptr);
      g_crash.handled[s] = false;
    }
  }
}
}  // namespace
}  // namespace faultline::core

using namespace faultline::core;

extern "C" int faultline_install(const faultline_options* caller) {
  // The caller's struct in this library's layout (install/options.h).
  faultline_options own;
  if (int rc = faultline::install::options_from_caller(caller, &own); rc != 0) return rc;
  // A seccomp filter that kills a call of the crash path (seccomp_filter.h).
  if (faultline::install::seccomp_stood_down()) return -EPERM;
  const faultline_options* opts = &own;
  resolve_real_sigaction();  // before any handler is installed
  Config* cfg = &g_crash.config;
  bool first = begin_install(cfg);
  // A second install (enable() after the preload, the C API twice) keeps the
  // arena it finds: a crash or a live dump on another thread may be writing
  // into it right now, so it is never unmapped or mapped again.
  if (g_crash.arena.capacity() == 0 && !init_arena(opts->arena_bytes)) return -ENOMEM;
  if (first) name_crash_stack();
  modules_init();
  choose_unwinder();
  read_chain_order(cfg);
  find_python_runtime();
  // The first install leaves what is unset alone: those globals are zeros
  // already, and even reading one is a page fault at start.
  classify_init(first);
  torchelastic_init(first);
  job_identity_init(first);
  cfg->write_stderr = opts->write_stderr != 0;  // for open_report_dir's message
  open_report_dir(cfg, opts->report_dir);
  stderr_remember();
  read_scrub_settings(cfg);
  read_crash_limits(cfg);
  copy_options(cfg, opts);
  // SIGTERM and SIGINT under torchrun, in the rank itself (not in a
  // process it started), where the program keeps its own view of them: the
  // interposer stays in front, or the library came late (a dlopen, after
  // the program's run time set its handlers).
  bool program_view_kept = opts->stay_in_front != 0 || !g_sigaction_interposed;
  cfg->signals |= shutdown_init(job_identity_present(), program_view_kept,
                                faultline::install::parent_in_same_job, cfg->signals);
  int dump_signo = choose_dump_signal(opts);
  cfg->dump_signal = dump_signo;
  g_crash.pid = sys_getpid();
  register_fork_handlers();
  reserve_fds();
  threads_init(cfg->thread_signal);
  if (dump_signo > 0 || !first) {
    // Its handler asks the helper, which cannot look for its command there.
    if (dump_signo > 0) prepare_dump_helper();
    install_dump_signal(dump_signo);
  }
  set_thread_altstacks(opts->thread_altstacks != 0);
  hook_terminate(first);
  g_stay_in_front = opts->stay_in_front != 0;
  g_stay_in_front_of_shutdown = g_stay_in_front;
  if (!g_argv_from_constructor) read_cmdline(cfg);
  if (first) read_exec_name(cfg);
  record_start_time(cfg);
  install_altstack();
  install_crash_handlers(cfg);
  g_crash.installed = true;
  // After the handlers: the watchdog's dump needs them.
  if (opts->dump_after_seconds > 0) {
    dump_later_arm(static_cast<uint64_t>(opts->dump_after_seconds) * 1000,
                   opts->exit_after_dump != 0, 0);
  }
  return 0;
}
