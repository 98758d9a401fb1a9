#include "install/dump_helper.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "core/base/arch.h"
#include "core/base/raw_log.h"
#include "core/base/sigaction_real.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/capture/annotations.h"
#include "core/crash_state.h"
#include "core/handler_state.h"
#include "core/write/report_file.h"
#include "core/write/stderr_summary.h"
#include "install/seccomp_hook.h"

extern char** environ;

namespace faultline::core {
namespace {

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif

// Declares the process's ptracer (Yama), straight to the kernel.
void set_ptracer(unsigned long who) {
  arch_syscall6(SYS_prctl, PR_SET_PTRACER, static_cast<long>(who), 0, 0, 0, 0);
}

// How long the helper may take before it is given up (killed, then the
// signal request): its own stop deadline is 1 s for all threads.
constexpr int kHelperTimeoutMs = 60 * 1000;
// How often the wait for its output looks whether it has exited.
constexpr int kExitCheckMs = 100;

// The command, found at the first dump ("": none; g_missing says why).
char g_cli[PATH_MAX];
const char* g_missing = nullptr;
bool g_looked = false;

// One helper at a time: its stacks and its arguments are static. Holds the
// pid of the process whose thread runs one (0: none): a fork child, which
// inherits the parent's value, is not kept waiting for a helper it lacks.
std::atomic<int> g_busy{0};
alignas(64) char g_child_stack[16 << 10];
alignas(64) char g_helper_stack[32 << 10];
constexpr int kMaxEnv = 1024;
char* g_envp[kMaxEnv + 1];

struct ChildArgs {
  const char* path;
  char* const* argv;
  int out_fd;     // the pipe's write end: the helper's stdout and stderr
  int dir_fd;     // the report directory: the helper's descriptor 3
  sigset_t mask;  // the caller's mask, the helper's at exec
  long max_fd;    // where closing one by one stops (no close_range)
  // libc's clone, resolved by the asking thread: no lazy binding in the
  // child, which runs on that thread's thread data.
  int (*clone_fn)(int (*)(void*), void*, int, void*, ...);
  volatile int go;  // 0: wait; 1: exec; 2: give up
};
ChildArgs g_args;

// The children share this process's memory and the asking thread's thread
// data (errno, cancellation state): they make only raw system calls.
long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  return arch_syscall6(n, a, b, c, d, e, f);
}
[[noreturn]] void child_exit(int code) {
  for (;;) sys(SYS_exit_group, code);
}

// The kernel's struct sigaction (rt_sigaction), as on x86-64 and arm64.
struct KernelSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  unsigned long mask;
};

bool executable(const char* path) {
  struct stat st;
  return path && path[0] == '/' && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
         access(path, X_OK) == 0;
}

// FAULTLINE_CLI, else `faultline` beside the library: DIR/../bin (a build
// tree, the Python package's bundle, PREFIX/lib), DIR/../../bin
// (PREFIX/lib/<multiarch>), DIR itself.
void find_cli() {
  g_looked = true;
  const char* off = secure_getenv("FAULTLINE_DUMP_HELPER");
  if (off && str_eq(off, "0")) {
    g_missing = "FAULTLINE_DUMP_HELPER=0";
    return;
  }
  if (getauxval(AT_SECURE)) {
    g_missing = "a setuid or file-capability program, which cannot be traced";
    return;
  }
  if (const char* cli = secure_getenv("FAULTLINE_CLI"); cli && cli[0]) {
    if (executable(cli) && str_copy(g_cli, sizeof g_cli, cli) < sizeof g_cli) return;
    g_cli[0] = '\0';
    g_missing = "FAULTLINE_CLI is not an executable file named by an absolute path";
    return;
  }
  Dl_info info;
  char lib[PATH_MAX];
  if (dladdr(reinterpret_cast<void*>(&dump_by_helper), &info) == 0 || !info.dli_fname ||
      !realpath(info.dli_fname, lib)) {
    g_missing = "the library's own file was not found, and FAULTLINE_CLI is not set";
    return;
  }
  char* slash = strrchr(lib, '/');
  if (slash) *slash = '\0';
  static const char* const kBeside[] = {"/../bin/faultline", "/../../bin/faultline", "/faultline"};
  for (const char* rel : kBeside) {
    StrBuf b(g_cli, sizeof g_cli);
    b.add(lib).add(rel);
    char real[PATH_MAX];
    if (executable(g_cli) && realpath(g_cli, real) &&
        str_copy(g_cli, sizeof g_cli, real) < sizeof g_cli)
      return;
  }
  g_cli[0] = '\0';
  g_missing = "no `faultline` command beside the library, and FAULTLINE_CLI is not set";
}

// The helper, until it is the command (the grandchild, started by
// stand_by): it shares this process's memory (CLONE_VM) until its exec,
// with descriptors and signal actions of its own.
int helper_main(void* p) {
  ChildArgs* a = static_cast<ChildArgs*>(p);
  // Ends with the one waiting for it (killed when the helper takes too long).
  sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
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
  int helper = a->clone_fn(helper_main, g_helper_stack + sizeof g_helper_stack,
                           CLONE_VM | CLONE_VFORK | SIGCHLD, a);
  if (helper < 0) child_exit(125);
  int status = 0;
  long r;
  while ((r = sys(SYS_wait4, helper, reinterpret_cast<long>(&status), 0, 0)) < 0) {
    if (r != -EINTR) child_exit(125);
  }
  child_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// The program's environment less LD_PRELOAD: the command would load
// faultline (or a sanitizer's runtime) into itself.
void helper_env() {
  int n = 0;
  for (char** e = environ; e && *e && n < kMaxEnv; ++e) {
    if (str_starts_with(*e, "LD_PRELOAD=")) continue;
    g_envp[n++] = *e;
  }
  g_envp[n] = nullptr;
}

void format_int(char* out, size_t size, long v) {
  StrBuf b(out, size);
  b.add_dec(v);
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
  char* nl = strrchr(text, '\n');
  return nl ? nl + 1 : text;
}

// Whether a seccomp filter applies to this thread (and so to the children
// it would start): one that kills or traps a clone without CLONE_THREAD,
// or a prctl, would end the job (SIGSYS). Set since load or inherited, the
// kernel says so in the thread's status ("Seccomp: 2"); where that cannot
// be read, as if it did.
const char* const kSeccompWhy =
    "a seccomp filter is in force, which may forbid the helper's process";
bool seccomp_filtered() {
  int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char text[4096];
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, text + len, sizeof text - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<size_t>(n);
    if (len == sizeof text - 1) break;
  }
  close(fd);
  text[len] = '\0';
  const char* line = strstr(text, "\nSeccomp:");
  if (!line) return len == 0 || len == sizeof text - 1;  // no CONFIG_SECCOMP: none
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

bool run_helper(Reason why) {
  int dir_err = 0;
  int dir_fd = report_dir_fd(&dir_err);
  if (dir_fd < 0) return why.set("the report directory cannot be opened: ", strerror(dir_err));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    if (dir_fd != g_crash.config.dir_fd) close(dir_fd);
    return why.set("pipe2: ", strerror(errno));
  }
  char pid[24], tid[24];
  format_int(pid, sizeof pid, sys_getpid());
  format_int(tid, sizeof tid, sys_gettid());
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
  helper_env();
  // Ours while g_busy holds this process's pid.
  ChildArgs& args = g_args;
  args = ChildArgs{};
  args.path = g_cli;
  args.argv = argv;
  args.out_fd = pipe_fds[1];
  args.dir_fd = dir_fd;
  long max_fd = sysconf(_SC_OPEN_MAX);
  args.max_fd = max_fd > 0 && max_fd < 65536 ? max_fd : 65536;
  args.clone_fn = &clone;
  // Every signal blocked while the helper has no handlers of its own yet
  // (it resets them before it unblocks): only for the clone itself.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &args.mask);
  // No exit signal: no SIGCHLD, and a "clone" child that only a wait with
  // __WALL or __WCLONE sees, never the program's wait(), waitpid(-1). The
  // helper is its child, not the program's.
  pid_t child = args.clone_fn(stand_by, g_child_stack + sizeof g_child_stack, CLONE_VM, &args);
  int clone_err = errno;
  pthread_sigmask(SIG_SETMASK, &args.mask, nullptr);
  close(pipe_fds[1]);
  if (dir_fd != g_crash.config.dir_fd) close(dir_fd);
  if (child < 0) {
    close(pipe_fds[0]);
    return why.set("clone: ", strerror(clone_err));
  }
  // Yama (scope 1): only that child and its descendants (the helper) may
  // trace this process, only now (EINVAL: no Yama, classic ptrace rules).
  // Straight to the kernel: the prctl() interposer records only the
  // program's own declarations.
  set_ptracer(static_cast<unsigned long>(child));
  __atomic_store_n(&args.go, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &args.go, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  // Its output, until it exits: end of file, or, where a fork of another
  // thread's kept a copy of the write end, the child's exit (looked at
  // every kExitCheckMs), then what is left in the pipe. This thread waits
  // here in poll and read while the helper stops it: a ptrace stop
  // restarts both.
  fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  char out[1024];
  size_t len = 0;
  bool timed_out = false;
  bool exited = false;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long waited =
        (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / (1000 * 1000);
    if (waited >= kHelperTimeoutMs) {
      timed_out = true;
      kill(child, SIGKILL);
      break;
    }
    if (!exited) {
      struct pollfd pfd = {pipe_fds[0], POLLIN, 0};
      int left = static_cast<int>(kHelperTimeoutMs - waited);
      int r = poll(&pfd, 1, left < kExitCheckMs ? left : kExitCheckMs);
      if (r < 0 && errno == EINTR) continue;  // a handler of the program's ran
      if (r <= 0) {
        // Exited (or reaped by the program: ECHILD), not yet reaped here.
        siginfo_t info = {};
        int w =
            waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT | __WALL);
        if ((w == 0 && info.si_pid == child) || (w != 0 && errno == ECHILD)) exited = true;
        continue;
      }
    }
    char chunk[256];
    ssize_t n = read(pipe_fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !exited) continue;
    if (n <= 0) break;
    // Keep the end: the last line is what counts.
    for (ssize_t i = 0; i < n; ++i) {
      if (len == sizeof out - 1) {
        memmove(out, out + sizeof out / 2, len - sizeof out / 2);
        len -= sizeof out / 2;
      }
      out[len++] = chunk[i];
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  pid_t reaped;
  while ((reaped = waitpid(child, &status, __WALL)) < 0 && errno == EINTR) {
  }
  // The program's own ptracer back (none unless it declared one).
  set_ptracer(faultline::install::g_program_ptracer);
  const char* line = last_line(out, len);
  if (timed_out) return why.set("the faultline helper took more than 60 s");
  if (reaped != child)
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

bool dump_by_helper(char* why, size_t why_size) {
  Reason reason = {why, why_size};
  why[0] = '\0';
  // A dump asked for while another thread's helper runs waits for it (the
  // helper stops this thread too, in its nanosleep, which it restarts).
  if (seccomp_filtered()) return reason.set(kSeccompWhy);
  int self = static_cast<int>(sys_getpid());
  for (int waited_ms = 0;; ++waited_ms) {
    int owner = 0;
    if (g_busy.compare_exchange_strong(owner, self, std::memory_order_acq_rel)) break;
    // The parent's, inherited by this fork child: no helper runs here.
    if (owner != self && g_busy.compare_exchange_strong(owner, self, std::memory_order_acq_rel))
      break;
    if (waited_ms > kHelperTimeoutMs + 1000)
      return reason.set("another thread's helper dump did not end");
    struct timespec ms = {0, 1000 * 1000};
    nanosleep(&ms, nullptr);
  }
  if (!g_looked) find_cli();
  bool ok = g_cli[0] ? run_helper(reason) : reason.set(g_missing);
  g_busy.store(0, std::memory_order_release);
  return ok;
}

}  // namespace faultline::core
