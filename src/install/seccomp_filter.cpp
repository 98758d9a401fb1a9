// Reading a seccomp filter before it goes in (seccomp_filter.h): the system
// calls of faultline's crash path, judged by the filter with the arguments
// the crash path makes them with, and stepping aside.
#include "install/seccomp_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "core/base/arch.h"
#include "core/base/raw_log.h"
#include "core/base/sys.h"
#include "core/crash_state.h"
#include "core/handler_state.h"
#include "faultline/faultline.h"

namespace faultline::install {
namespace {

using faultline::core::g_crash;

// Stand-ins for arguments that take this process's values: its ids, each
// signal the crash path sends or sets, each descriptor it opens files at.
enum : long { kPid = -1001, kTid = -1002, kSignal = -1003, kDirFd = -1004 };

// A system call of the crash path and the arguments it is made with.
// `hands_on`: the crash is handed on with it (the signal's own fate), so
// the filter must allow it; for the others an error is handled (no report,
// or a fallback), only a fatal answer is not. Names are held in place, not
// pointed to: a table of pointers would be relocated at every start.
struct Probe {
  char name[20];
  long nr;
  bool hands_on;
  long args[6];
};

constexpr long kReport = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
constexpr long kAnon = MAP_PRIVATE | MAP_ANONYMOUS;
constexpr long kRw = PROT_READ | PROT_WRITE;
constexpr long kProcmapQuery = 0xc0686611;  // PROCMAP_QUERY (fault_access.cpp)
constexpr long kNoHugePage = 15;            // MADV_NOHUGEPAGE
constexpr long kPopulateWrite = 23;         // MADV_POPULATE_WRITE (arena.cpp)

// clang-format off
#define P(name, hands_on, ...) {#name, SYS_##name, hands_on, {__VA_ARGS__}}
const Probe kProbes[] = {
    P(rt_sigreturn, true),
    P(rt_sigaction, true, kSignal),
    P(rt_sigprocmask, true, SIG_SETMASK),
    P(rt_sigprocmask, true, SIG_BLOCK),
    P(rt_sigprocmask, true, SIG_UNBLOCK),
    P(rt_tgsigqueueinfo, true, kPid, kTid, kSignal),
    P(tgkill, true, kPid, kTid, kSignal),
    P(rt_sigqueueinfo, true, kPid, kSignal),
    P(kill, true, kPid, kSignal),
    P(gettid, true),
    P(getpid, true),
    P(exit_group, true),
    P(exit, true),
    P(rt_sigpending, false),
    P(rt_sigtimedwait, false),
    P(sigaltstack, false),
    P(getppid, false),
    P(getuid, false),
    P(geteuid, false),
    P(uname, false),
    P(prctl, false, PR_GET_NAME),
    P(clock_gettime, false, CLOCK_MONOTONIC),
    P(clock_gettime, false, CLOCK_REALTIME),
    P(clock_nanosleep, false, CLOCK_REALTIME),
    P(sched_yield, false),
    P(sched_getaffinity, false, kTid),
    P(futex, false, 0, FUTEX_WAIT),
    P(futex, false, 0, FUTEX_WAKE),
    P(futex, false, 0, FUTEX_WAIT_PRIVATE),
    P(futex, false, 0, FUTEX_WAKE_PRIVATE),
    P(getrandom, false),
    P(timer_create, false, CLOCK_MONOTONIC),
    P(timer_settime, false),
    P(timer_delete, false),
    P(setitimer, false, ITIMER_REAL),
    P(process_vm_readv, false, kPid),
    P(pipe2, false, 0, O_CLOEXEC),
    P(pipe2, false, 0, O_CLOEXEC | O_NONBLOCK),
    P(mmap, false, 0, 0, kRw, kAnon, -1, 0),
    P(mmap, false, 0, 0, kRw, kAnon | MAP_NORESERVE, -1, 0),
    P(mprotect, false, 0, 0, PROT_NONE),
    P(mprotect, false, 0, 0, kRw),
    P(munmap, false),
    P(madvise, false, 0, 0, MADV_DONTNEED),
    P(madvise, false, 0, 0, kNoHugePage),
    P(madvise, false, 0, 0, kPopulateWrite),
    P(openat, false, AT_FDCWD, 0, O_RDONLY | O_CLOEXEC),
    P(openat, false, AT_FDCWD, 0, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
    P(openat, false, kDirFd, 0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
    P(openat, false, kDirFd, 0, kReport, 0600),
    P(openat, false, AT_FDCWD, 0, kReport, 0600),
    P(openat, false, kDirFd, 0, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600),
    P(openat, false, AT_FDCWD, 0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600),
    P(openat, false, kDirFd, 0, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
    P(read, false),
    P(pread64, false),
    P(write, false),
    P(pwrite64, false),
    P(close, false),
    P(fsync, false),
    P(fcntl, false, 0, F_GETFD),
    P(fcntl, false, 0, F_GETFL),
    P(fcntl, false, 0, F_SETFD),
    P(fcntl, false, 0, F_DUPFD_CLOEXEC),
    P(newfstatat, false),
    P(newfstatat, false, 0, 0, 0, AT_EMPTY_PATH),
    P(fstatfs, false),
    P(getdents64, false),
    P(getcwd, false),
    P(readlinkat, false, AT_FDCWD),
    P(renameat2, false, kDirFd, 0, kDirFd),
    P(linkat, false, kDirFd, 0, kDirFd),
    P(unlinkat, false, kDirFd),
    P(ioctl, false, 0, kProcmapQuery),
    P(ppoll, false),
#ifdef SYS_fstat
    P(fstat, false),
#endif
#ifdef SYS_readlink
    P(readlink, false),
#endif
#ifdef SYS_renameat
    P(renameat, false, kDirFd, 0, kDirFd),
#endif
#ifdef SYS_poll
    P(poll, false),
#endif
#ifdef SYS_open
    P(open, false, 0, O_RDONLY | O_CLOEXEC),
#endif
#ifdef SYS_alarm
    P(alarm, false),
#endif
};
#undef P
// clang-format on

// The values a stand-in takes: every signal the crash path sends or sets
// (those faultline handles, the stack request, the dump signal, the
// watchdog's SIGALRM, SIGPIPE and SIGXFSZ it ignores while writing), and
// the descriptors it opens files at.
int values_of(long stand_in, long* out, int cap) {
  int n = 0;
  auto add = [&](long v) {
    for (int i = 0; i < n; ++i) {
      if (out[i] == v) return;
    }
    if (n < cap) out[n++] = v;
  };
  switch (stand_in) {
    case kPid:
      add(faultline::core::sys_getpid());
      break;
    case kTid:
      add(faultline::core::sys_gettid());
      break;
    case kDirFd:
      add(AT_FDCWD);
      if (g_crash.config.dir_fd >= 0) add(g_crash.config.dir_fd);
      add(3);
      break;
    default: {
      static const int kFixed[] = {SIGSEGV, SIGBUS,  SIGILL,  SIGFPE, SIGABRT, SIGTRAP,
                                   SIGSYS,  SIGALRM, SIGTERM, SIGINT, SIGPIPE, SIGXFSZ};
      for (int s : kFixed) add(s);
      for (int s = 1; s < 64; ++s) {
        if ((g_crash.config.signals >> s) & 1) add(s);
      }
      add(g_crash.config.thread_signal > 0 ? g_crash.config.thread_signal : SIGRTMAX - 3);
      if (g_crash.config.dump_signal > 0) add(g_crash.config.dump_signal);
      break;
    }
  }
  return n;
}

// The worst answer of the filter to system call p, each stand-in tried
// with each value it takes (one stand-in per call at most).
SeccompVerdict judge(const sock_filter* prog, unsigned n, const Probe& p) {
  int which = -1;
  for (int i = 0; i < 6; ++i) {
    if (p.args[i] <= kPid && p.args[i] >= kDirFd) which = i;
  }
  long values[80];
  int nvalues = which < 0 ? 1 : values_of(p.args[which], values, 80);
  SeccompVerdict worst = SeccompVerdict::kAllow;
  for (int k = 0; k < nvalues; ++k) {
    seccomp_data d = {};
    d.nr = static_cast<int>(p.nr);
    d.arch = faultline::core::kArchAudit;
    for (int i = 0; i < 6; ++i) {
      long a = i == which ? values[k] : p.args[i];
      if (i != which && a <= kPid && a >= kDirFd) {
        long one;
        values_of(a, &one, 1);
        a = one;
      }
      d.args[i] = static_cast<uint64_t>(a);
    }
    SeccompVerdict v = seccomp_evaluate(prog, n, d);
    if (static_cast<int>(v) > static_cast<int>(worst)) worst = v;
  }
  return worst;
}

char g_stood_down[64];

// Stepping aside: faultline's handlers give way to the program's, as
// faultline_uninstall() does, and a later install is refused. `why`: the
// system call the filter stops ("strict mode": all but four). First the
// owner word, for good: a live dump in progress is let finish (its calls
// may be fatal once the filter is in), a crash in progress ends the
// process (its owner will); one that reached the handler later is handed on
// (core/handler_state.h, kStoodDown).
void stand_down(const char* why) {
  size_t n = 0;
  for (; why[n] && n + 1 < sizeof g_stood_down; ++n) g_stood_down[n] = why[n];
  g_stood_down[n] = '\0';
  if (!g_crash.installed) return;
  auto& owner = faultline::core::g_handler.owner;
  for (int waited_ms = 0;; ++waited_ms) {
    pid_t expected = 0;
    if (owner.compare_exchange_strong(expected, faultline::core::kStoodDown,
                                      std::memory_order_acq_rel)) {
      break;
    }
    if (expected == faultline::core::kStoodDown) break;
    // A dump that has not ended in 30 s: the filter goes in regardless.
    if ((expected & faultline::core::kDumpBit) && waited_ms > 30 * 1000) break;
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  if (g_crash.config.write_stderr) {
    faultline::core::raw_log("faultline: a seccomp filter would stop the crash handler (",
                             g_stood_down,
                             "); crash reports are off in this process, so that a crash ends "
                             "as it would without faultline\n");
  }
  faultline_uninstall();
}

// Copies n bytes of the caller's memory at addr without faulting on a bad
// pointer: through a pipe, not process_vm_readv, which a filter already in
// place may kill. kRead, kBadAddress (the kernel will answer EFAULT: no
// filter), or kUnreadable (no pipe: out of descriptors, or refused).
enum class Read { kRead, kBadAddress, kUnreadable };
Read read_caller(void* dst, uintptr_t addr, size_t n) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Read::kUnreadable;
  Read r = Read::kRead;
  for (size_t done = 0; r == Read::kRead && done < n; done += 4096) {
    size_t chunk = n - done < 4096 ? n - done : 4096;
    ssize_t w = write(fds[1], reinterpret_cast<const void*>(addr + done), chunk);
    if (w != static_cast<ssize_t>(chunk)) {
      r = w < 0 && errno == EFAULT ? Read::kBadAddress : Read::kUnreadable;
    } else if (read(fds[0], static_cast<char*>(dst) + done, chunk) != w) {
      r = Read::kUnreadable;
    }
  }
  close(fds[0]);
  close(fds[1]);
  return r;
}

// The kernel sets a filter only for a thread with no_new_privs or
// CAP_SYS_ADMIN (EACCES otherwise). Straight to the kernel: the prctl()
// interposer is this library's.
bool may_set_filter() {
  if (faultline::core::arch_syscall6(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0, 0) == 1) {
    return true;
  }
  __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (faultline::core::arch_syscall6(SYS_capget, reinterpret_cast<long>(&hdr),
                                     reinterpret_cast<long>(data), 0, 0, 0, 0) != 0) {
    return true;  // unknown: as if it may
  }
  return (data[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1;
}

}  // namespace

const char* seccomp_fatal_call(const sock_filter* prog, unsigned n, bool strict) {
  for (const Probe& p : kProbes) {
    if (strict) {
      bool ok =
          p.nr == SYS_read || p.nr == SYS_write || p.nr == SYS_exit || p.nr == SYS_rt_sigreturn;
      if (!ok) return p.name;
      continue;
    }
    SeccompVerdict v = judge(prog, n, p);
    if (v == SeccompVerdict::kFatal || (v == SeccompVerdict::kRefuse && p.hands_on)) return p.name;
  }
  return nullptr;
}

void seccomp_before_set(bool strict, uintptr_t prog_addr) {
  if (g_stood_down[0]) return;
  // A vfork() or CLONE_VM child (before its exec) shares this memory: its
  // filter is its own, faultline stays in the parent.
  if (g_crash.pid != 0 && faultline::core::sys_getpid() != g_crash.pid) return;
  if (strict) {
    stand_down("strict mode");
    return;
  }
  if (!prog_addr || !may_set_filter()) return;  // EFAULT, EACCES: no filter
  sock_fprog fprog;
  Read r = read_caller(&fprog, prog_addr, sizeof fprog);
  if (r == Read::kBadAddress) return;  // EFAULT: no filter
  if (r == Read::kUnreadable) {
    stand_down("a filter faultline could not read");
    return;
  }
  if (fprog.len == 0 || fprog.len > BPF_MAXINSNS || !fprog.filter) return;  // EINVAL, EFAULT
  size_t bytes = fprog.len * sizeof(sock_filter);
  void* copy = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) {
    stand_down("a filter faultline could not read");
    return;
  }
  auto* filter = static_cast<sock_filter*>(copy);
  r = read_caller(filter, reinterpret_cast<uintptr_t>(fprog.filter), bytes);
  if (r == Read::kUnreadable) {
    stand_down("a filter faultline could not read");
  } else if (r == Read::kRead && seccomp_valid(filter, fprog.len)) {  // else: no filter
    if (const char* call = seccomp_fatal_call(filter, fprog.len, false)) stand_down(call);
  }
  munmap(copy, bytes);
}

const char* seccomp_stood_down() {
  return g_stood_down[0] ? g_stood_down : nullptr;
}

}  // namespace faultline::install
