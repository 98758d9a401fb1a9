#include "core/signal/helper_dump.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "core/base/arch.h"
#include "core/base/raw_log.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/capture/annotations.h"
#include "core/crash_state.h"
#include "core/handler_state.h"
#include "core/write/report_file.h"
#include "core/write/stderr_summary.h"

extern char** environ;

namespace faultline::core {

volatile unsigned long g_program_ptracer = 0;

namespace {

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif

// Every call below is a raw system call: it leaves errno alone, takes no
// lock of libc's, and is safe in a signal handler and in the children,
// which share this process's memory and the asking thread's thread data.
long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  return arch_syscall6(n, a, b, c, d, e, f);
}
[[noreturn]] void child_exit(int code) {
  for (;;) sys(SYS_exit_group, code);
}

// Declares the process's ptracer (Yama), straight to the kernel: the
// prctl() interposer records only the program's own declarations.
void set_ptracer(unsigned long who) {
  sys(SYS_prctl, PR_SET_PTRACER, static_cast<long>(who));
}

// How long the helper may take before it is given up (killed, then the
// signal request): its own stop deadline is 1 s for all threads.
constexpr int kHelperTimeoutMs = 60 * 1000;
// How often the wait for its output looks whether it has exited, or whether
// a crash waits for this dump (then the helper is killed: the crash's
// report has every thread).
constexpr int kExitCheckMs = 100;

// The command, set at install (helper_dump_set_command).
char g_cli[PATH_MAX];
const char* g_missing = "the faultline command was not looked for";
bool g_known = false;

// One helper at a time: its stacks and its arguments are static. Holds
// pid << 32 | tid of the thread that runs one (0: none): a fork child,
// which inherits the parent's value, is not kept waiting for a helper it
// lacks, and a dump signal that lands on that very thread does not wait for
// itself.
std::atomic<unsigned long> g_busy{0};
alignas(64) char g_child_stack[16 << 10];
alignas(64) char g_helper_stack[32 << 10];
// The helper's environment: the program's as it was when the command was
// found (helper_dump_set_command, normal context), less LD_PRELOAD, copied
// here. Never read from environ in a handler: another thread's setenv() may
// be freeing the array or its strings at that moment.
constexpr int kMaxEnv = 1024;
char* g_envp[kMaxEnv + 1];
char g_env_text[64 << 10];
// The thread's status, and the helper's output: static, not on the stack,
// which in the dump signal's handler may be a small signal stack (Python's
// faulthandler's is under 10 KiB).
char g_text[4096];
char g_out[1024];
char g_chunk[256];

struct ChildArgs {
  const char* path;
  char* const* argv;
  int out_fd;                 // the pipe's write end: the helper's stdout and stderr
  int dir_fd;                 // the report directory: the helper's descriptor 3
  unsigned long mask;         // the signal mask the helper execs with (kernel's)
  long max_fd;                // where closing one by one stops (no close_range)
  volatile int go;            // 0: wait; 1: exec; 2: give up
  volatile int stand_by_pid;  // stand_by's, written by it: the helper's parent
  volatile int helper_pid;    // the helper's once started (0: not yet)
};
ChildArgs g_args;

// libc's clone: a few instructions around the system call (the new child
// needs its own stack from the first instruction, which a raw system call
// from C cannot give). Resolved at load (its address is taken), so the
// child never runs the lazy binder on the asking thread's thread data.
using CloneFn = int (*)(int (*)(void*), void*, int, void*, ...);
CloneFn const g_clone = &clone;

// The kernel's struct sigaction (rt_sigaction), as on x86-64 and arm64.
struct KernelSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  unsigned long mask;
};

// The helper, until it is the command (the grandchild, started by
// stand_by): it shares this process's memory (CLONE_VM) until its exec,
// with descriptors and signal actions of its own.
int helper_main(void* p) {
  ChildArgs* a = static_cast<ChildArgs*>(p);
  // Ends with the one waiting for it (killed when the helper takes too
  // long, or a crash comes): stand_by is a process of one thread, so its
  // death is the parent's death PDEATHSIG watches.
  sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
  // stand_by killed before that: no one would end this one.
  if (sys(SYS_getppid) != a->stand_by_pid) child_exit(127);
  // A session of its own: a terminal's ^C or a signal to the job's process
  // group is the job's, not a reason to end the dump half-way.
  sys(SYS_setsid);
  // The program's handlers are this copy's: put to default before the mask
  // opens, as exec would (the system call, never the interposer, which
  // would record into the program's memory).
  for (int s = 1; s < 65; ++s) {
    KernelSigaction old = {};
    if (sys(SYS_rt_sigaction, s, 0, reinterpret_cast<long>(&old), 8) != 0) continue;
    auto h = reinterpret_cast<void (*)(int)>(old.handler);
    if (h == SIG_IGN || h == SIG_DFL) continue;
    KernelSigaction dfl = {};
    sys(SYS_rt_sigaction, s, reinterpret_cast<long>(&dfl), 0, 8);
  }
  sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&a->mask), 0, 8);
  sys(SYS_execve, reinterpret_cast<long>(a->path), reinterpret_cast<long>(a->argv),
      reinterpret_cast<long>(g_envp));
  child_exit(127);
}

// The child of this process: the helper's parent, which the program never
// sees. An exec makes any child a SIGCHLD one, so this one never execs: it
// was made with no exit signal, keeps every signal blocked, waits until the
// parent has allowed it (and so its descendants) to trace (go), starts the
// helper, waits for it and exits with its status.
int stand_by(void* p) {
  ChildArgs* a = static_cast<ChildArgs*>(p);
  int go;
  while ((go = __atomic_load_n(&a->go, __ATOMIC_ACQUIRE)) == 0)
    sys(SYS_futex, reinterpret_cast<long>(&a->go), FUTEX_WAIT, 0);
  if (go != 1) child_exit(127);
  // Only what the helper needs, at once: a copy of one of the program's
  // descriptors kept open here would keep its file or connection open.
  // Above the three it gets, so that none is overwritten by another's dup.
  long out = sys(SYS_fcntl, a->out_fd, F_DUPFD, 10);
  long dir = sys(SYS_fcntl, a->dir_fd, F_DUPFD, 10);
  long null = sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDONLY);
  if (out < 0 || dir < 0 || null < 0) child_exit(126);
  if ((null != 0 && sys(SYS_dup3, null, 0, 0) < 0) || sys(SYS_dup3, out, 1, 0) < 0 ||
      sys(SYS_dup3, out, 2, 0) < 0 || sys(SYS_dup3, dir, 3, 0) < 0)
    child_exit(126);
  // Nothing else of the program's: close_range (Linux 5.9), else one by one.
  if (sys(SYS_close_range, 4, ~0u, 0) != 0) {
    for (long fd = 4; fd < a->max_fd; ++fd) sys(SYS_close, fd);
  }
  a->stand_by_pid = static_cast<int>(sys(SYS_getpid));
  int helper = g_clone(helper_main, g_helper_stack + sizeof g_helper_stack,
                       CLONE_VM | CLONE_VFORK | SIGCHLD, a);
  if (helper < 0) child_exit(125);
  a->helper_pid = helper;
  // Its end seen but not reaped (its pid stays its own), then no longer
  // named for stop_helper to kill, then reaped.
  siginfo_t ended;
  long r;
  while ((r = sys(SYS_waitid, P_PID, helper, reinterpret_cast<long>(&ended), WEXITED | WNOWAIT,
                  0)) == -EINTR) {
  }
  a->helper_pid = 0;
  int status = 0;
  while ((r = sys(SYS_wait4, helper, reinterpret_cast<long>(&status), 0, 0)) < 0) {
    if (r != -EINTR) child_exit(125);
  }
  child_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// Copies the program's environment less LD_PRELOAD (the command would load
// faultline, or a sanitizer's runtime, into itself) into g_envp: normal
// context only. What does not fit is left out.
void copy_env() {
  int n = 0;
  size_t off = 0;
  for (char** e = environ; e && *e && n < kMaxEnv; ++e) {
    if (str_starts_with(*e, "LD_PRELOAD=")) continue;
    size_t len = str_len(*e);
    if (off + len + 1 > sizeof g_env_text) continue;
    str_copy(g_env_text + off, len + 1, *e);
    g_envp[n++] = g_env_text + off;
    off += len + 1;
  }
  g_envp[n] = nullptr;
}

// Says on stderr where the report is, as a dump written in the process
// does: unless FAULTLINE_STDERR=0, or the Python package writes
// faulthandler's text instead (its "faultline.faulthandler" crash key).
void announce_report() {
  if (!g_crash.config.write_stderr) return;
  static AnnotationView views[kMaxAnnotations];
  static char storage[kMaxAnnotations * (kAnnotationKeyBytes + kAnnotationValueBytes)];
  int n = annotations_snapshot(views, kMaxAnnotations, storage, sizeof storage);
  for (int i = 0; i < n; ++i)
    if (views[i].key && str_eq(views[i].key, "faultline.faulthandler")) return;
  raw_log("faultline: report written to ");
  write_escaped_line(g_handler.last_report,
                     str_nlen(g_handler.last_report, sizeof g_handler.last_report));
}

// Records the report the helper wrote: its name under the report directory
// (the helper printed it under /proc/self/fd/3).
void record_report(const char* printed) {
  const char* name = path_basename(printed);
  StrBuf last(g_handler.last_report, sizeof g_handler.last_report);
  last.add(g_crash.config.dir).add("/").add(name);
  g_handler.dumps_written.fetch_add(1, std::memory_order_acq_rel);
  announce_report();
}

// The helper's last line of output (its path, or why it failed), without
// the newline.
const char* last_line(char* text, size_t len) {
  while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = '\0';
  text[len] = '\0';
  const char* line = text;
  for (size_t i = 0; i < len; ++i)
    if (text[i] == '\n') line = text + i + 1;
  return line;
}

// Whether a seccomp filter applies to this thread (and so to the children
// it would start): one that kills or traps a clone without CLONE_THREAD,
// or a prctl, would end the job (SIGSYS). Set since load or inherited, the
// kernel says so in the thread's status ("Seccomp: 2"); where that cannot
// be read, as if it did.
const char* const kSeccompWhy =
    "a seccomp filter is in force, which may forbid the helper's process";
bool seccomp_filtered() {
  long fd = sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/thread-self/status"),
                O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char* text = g_text;
  size_t len = 0;
  for (;;) {
    long n = sys(SYS_read, fd, reinterpret_cast<long>(text + len),
                 static_cast<long>(sizeof g_text - 1 - len));
    if (n == -EINTR) continue;
    if (n <= 0) break;
    len += static_cast<size_t>(n);
    if (len == sizeof g_text - 1) break;
  }
  sys(SYS_close, fd);
  text[len] = '\0';
  const char* line = str_find(text, len, "\nSeccomp:");
  if (!line) return len == 0 || len == sizeof g_text - 1;  // no CONFIG_SECCOMP: none
  line += str_len("\nSeccomp:");
  while (*line == ' ' || *line == '\t') ++line;
  return *line != '0';
}

struct Reason {
  char* buf;
  size_t size;
  bool set(const char* a, const char* b = nullptr, const char* c = nullptr) {
    StrBuf s(buf, size);
    s.add(a);
    if (b) s.add(b);
    if (c) s.add(c);
    return false;
  }
};

const char* const kCrashWhy = "a crash came during the dump; its report has every thread";

// Whether a crash waits for this dump or is being reported: the helper must
// let the threads go at once. In the dump signal's handler this dump owns
// the handler, and a crash says so in crash_waiting; a dump made by a call
// (faultline_dump_now) owns nothing, and a crash simply takes the owner word.
bool crash_in_progress(bool in_handler) {
  if (g_handler.crash_waiting.load(std::memory_order_acquire)) return true;
  if (in_handler) return false;
  pid_t owner = g_handler.owner.load(std::memory_order_acquire);
  return owner != 0 && owner != kStoodDown && !(owner & kDumpBit);
}

// Ends a helper given up: the helper first (a tracer's death lets the
// threads it stopped go), so that stand_by reaps it and exits, and nothing
// is left to be reparented (to a subreaper program, or to init); stand_by
// itself only if it has not ended within kStopGraceMs.
constexpr int kStopGraceMs = 1000;
void stop_helper(int child) {
  int helper = g_args.helper_pid;
  if (helper > 0) {
    sys(SYS_kill, helper, SIGKILL);
    for (int ms = 0; ms < kStopGraceMs; ++ms) {
      siginfo_t info = {};
      long w = sys(SYS_waitid, P_PID, child, reinterpret_cast<long>(&info),
                   WEXITED | WNOHANG | WNOWAIT | __WALL, 0);
      if ((w == 0 && info.si_pid == child) || w == -ECHILD) return;
      struct timespec ts = {0, 1000 * 1000};
      sys(SYS_nanosleep, reinterpret_cast<long>(&ts), 0);
    }
  }
  sys(SYS_kill, child, SIGKILL);
}

// Waits for the helper (child: stand_by) and keeps the end of its output
// (the last line is what counts). Gives it up after kHelperTimeoutMs, or
// at once when a crash waits for the dump this handler owns (watch_crash):
// the helper is killed and the threads it stopped are let go (a tracer's
// death detaches them). Returns stand_by's status, -1 when reaped by the
// program, -2 when timed out, -3 when a crash came.
int wait_helper(int pipe_fd, int child, char* out, size_t out_size, size_t* out_len,
                bool in_handler) {
  // Its output, until it exits: end of file, or, where a fork of another
  // thread's kept a copy of the write end, the child's exit (looked at
  // every kExitCheckMs), then what is left in the pipe. This thread waits
  // here in poll and read while the helper stops it: a ptrace stop
  // restarts both.
  sys(SYS_fcntl, pipe_fd, F_SETFL, O_NONBLOCK);
  size_t len = 0;
  int given_up = 0;
  bool exited = false;
  uint64_t start = monotonic_ns();
  for (;;) {
    long waited = static_cast<long>((monotonic_ns() - start) / (1000 * 1000));
    if (waited >= kHelperTimeoutMs) given_up = -2;
    if (crash_in_progress(in_handler)) given_up = -3;
    if (given_up) {
      stop_helper(child);
      break;
    }
    if (!exited) {
      struct pollfd pfd = {pipe_fd, POLLIN, 0};
      long left = kHelperTimeoutMs - waited;
      struct timespec ts = {0, (left < kExitCheckMs ? left : kExitCheckMs) * 1000 * 1000};
      long r = sys(SYS_ppoll, reinterpret_cast<long>(&pfd), 1, reinterpret_cast<long>(&ts), 0, 8);
      if (r == -EINTR) continue;  // a handler of the program's ran
      if (r <= 0) {
        // Exited (or reaped by the program: ECHILD), not yet reaped here.
        siginfo_t info = {};
        long w = sys(SYS_waitid, P_PID, child, reinterpret_cast<long>(&info),
                     WEXITED | WNOHANG | WNOWAIT | __WALL, 0);
        if ((w == 0 && info.si_pid == child) || w == -ECHILD) exited = true;
        continue;
      }
    }
    char* chunk = g_chunk;
    long n = sys(SYS_read, pipe_fd, reinterpret_cast<long>(chunk), sizeof g_chunk);
    if (n == -EINTR) continue;
    if (n == -EAGAIN && !exited) continue;
    if (n <= 0) break;
    for (long i = 0; i < n; ++i) {
      if (len == out_size - 1) {
        memmove(out, out + out_size / 2, len - out_size / 2);
        len -= out_size / 2;
      }
      out[len++] = chunk[i];
    }
  }
  *out_len = len;
  int status = 0;
  long reaped;
  while ((reaped = sys(SYS_wait4, child, reinterpret_cast<long>(&status), __WALL, 0)) == -EINTR) {
  }
  if (given_up) return given_up;
  return reaped == child ? status : -1;
}

bool run_helper(Reason why, const sigset_t* exec_mask, bool in_handler) {
  int dir_err = 0;
  int dir_fd = report_dir_fd(&dir_err);
  if (dir_fd < 0)
    return why.set("the report directory cannot be opened: ", strerrorname_np(dir_err));
  auto close_dir = [&] {
    if (dir_fd != g_crash.config.dir_fd) sys(SYS_close, dir_fd);
  };
  int pipe_fds[2];
  if (long r = sys(SYS_pipe2, reinterpret_cast<long>(pipe_fds), O_CLOEXEC); r != 0) {
    close_dir();
    return why.set("pipe2: ", strerrorname_np(static_cast<int>(-r)));
  }
  char pid[24], tid[24];
  StrBuf(pid, sizeof pid).add_dec(sys_getpid());
  StrBuf(tid, sizeof tid).add_dec(sys_gettid());
  char* argv[] = {g_cli,
                  const_cast<char*>("dump"),
                  const_cast<char*>("--method"),
                  const_cast<char*>("ptrace"),
                  const_cast<char*>("--print-path"),
                  const_cast<char*>("--dir"),
                  const_cast<char*>("/proc/self/fd/3"),
                  const_cast<char*>("--asked-by"),
                  tid,
                  pid,
                  nullptr};
  // Ours while g_busy holds this thread.
  ChildArgs& args = g_args;
  args = ChildArgs{};
  args.path = g_cli;
  args.argv = argv;
  args.out_fd = pipe_fds[1];
  args.dir_fd = dir_fd;
  struct rlimit nofile = {};
  sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&nofile));
  args.max_fd =
      nofile.rlim_cur > 0 && nofile.rlim_cur < 65536 ? static_cast<long>(nofile.rlim_cur) : 65536;
  // Every signal blocked while the helper has no handlers of its own yet
  // (it resets them before it unblocks): only for the clone itself.
  unsigned long all = ~0ul, mask = 0;
  sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&all), reinterpret_cast<long>(&mask),
      8);
  // The command starts with nothing blocked unless told (a watchdog thread
  // blocks everything: its helper's own timers would never fire).
  args.mask = 0;
  if (exec_mask) memcpy(&args.mask, exec_mask, sizeof args.mask);
  // No exit signal: no SIGCHLD, and a "clone" child that only a wait with
  // __WALL or __WCLONE sees, never the program's wait(), waitpid(-1). The
  // helper is its child, not the program's. libc's clone sets errno when it
  // fails: kept as the caller had it.
  int saved_errno = errno;
  int child = g_clone(stand_by, g_child_stack + sizeof g_child_stack, CLONE_VM, &args);
  int clone_err = errno;
  errno = saved_errno;
  sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&mask), 0, 8);
  sys(SYS_close, pipe_fds[1]);
  close_dir();
  if (child < 0) {
    sys(SYS_close, pipe_fds[0]);
    return why.set("clone: ", strerrorname_np(clone_err));
  }
  // Yama (scope 1): only that child and its descendants (the helper) may
  // trace this process, only now (EINVAL: no Yama, classic ptrace rules).
  set_ptracer(static_cast<unsigned long>(child));
  __atomic_store_n(&args.go, 1, __ATOMIC_RELEASE);
  sys(SYS_futex, reinterpret_cast<long>(&args.go), FUTEX_WAKE, 1);
  char* out = g_out;
  size_t len = 0;
  int status = wait_helper(pipe_fds[0], child, out, sizeof g_out, &len, in_handler);
  sys(SYS_close, pipe_fds[0]);
  // The program's own ptracer back (none unless it declared one).
  set_ptracer(g_program_ptracer);
  const char* line = last_line(out, len);
  if (status == -3) return why.set(kCrashWhy);
  if (status == -2) return why.set("the faultline helper took more than 60 s");
  if (status == -1)
    return why.set("the program reaped the faultline helper's parent (waitpid with __WALL)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      return why.set("the faultline helper could not be started: ", g_cli);
    if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 128))
      return why.set("the faultline helper was killed by a signal");
    return why.set(line[0] ? line : "the faultline helper failed");
  }
  if (!str_starts_with(line, "/proc/self/fd/3/"))
    return why.set("the faultline helper printed no report: ", line);
  record_report(line);
  return true;
}

}  // namespace

void helper_dump_set_command(const char* cli, const char* missing) {
  if (!cli || str_copy(g_cli, sizeof g_cli, cli) >= sizeof g_cli) g_cli[0] = '\0';
  g_missing = g_cli[0] ? nullptr : missing;
  if (g_cli[0]) copy_env();
  __atomic_store_n(&g_known, true, __ATOMIC_RELEASE);
}

bool helper_dump_command_known() {
  return __atomic_load_n(&g_known, __ATOMIC_ACQUIRE);
}

bool helper_dump(char* why, size_t why_size, const sigset_t* exec_mask, bool in_handler) {
  Reason reason = {why, why_size};
  why[0] = '\0';
  if (!helper_dump_command_known()) return reason.set(g_missing);
  if (!g_cli[0]) return reason.set(g_missing);
  // A dump asked for while another thread's helper runs waits for it (the
  // helper stops this thread too, in its nanosleep, which it restarts).
  unsigned long pid = static_cast<unsigned long>(sys_getpid());
  unsigned long self = pid << 32 | static_cast<unsigned long>(sys_gettid());
  for (int waited_ms = 0;; ++waited_ms) {
    unsigned long owner = 0;
    if (g_busy.compare_exchange_strong(owner, self, std::memory_order_acq_rel)) break;
    // The parent's, inherited by this fork child: no helper runs here.
    if (owner >> 32 != pid &&
        g_busy.compare_exchange_strong(owner, self, std::memory_order_acq_rel))
      break;
    // This thread's own helper dump, which the dump signal interrupted: the
    // dump being taken answers it (a signal request now would interrupt
    // every thread, and the helper has them stopped).
    if (owner == self) return true;
    if (crash_in_progress(in_handler)) return reason.set(kCrashWhy);
    if (waited_ms > kHelperTimeoutMs + 1000)
      return reason.set("another thread's helper dump did not end");
    struct timespec ms = {0, 1000 * 1000};
    sys(SYS_nanosleep, reinterpret_cast<long>(&ms), 0);
  }
  bool ok =
      !seccomp_filtered() ? run_helper(reason, exec_mask, in_handler) : reason.set(kSeccompWhy);
  g_busy.store(0, std::memory_order_release);
  return ok;
}

}  // namespace faultline::core
