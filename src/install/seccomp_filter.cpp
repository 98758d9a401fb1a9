#include "install/seccomp_filter.h"

#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/base/arch.h"
#include "core/base/raw_log.h"
#include "core/base/sys.h"
#include "core/crash_state.h"
#include "faultline/faultline.h"

namespace faultline::install {
namespace {

using faultline::core::g_crash;

// A system call of the crash path, with the arguments it is made with
// (kPid, kTid and kSignal stand for this process's and thread's ids and
// each signal the crash path sends).
enum : long { kPid = -1001, kTid = -1002, kSignal = -1003 };
// Names are held in place, not pointed to: a table of pointers would be
// relocated by the loader in every process at start.
struct Probe {
  char name[20];
  long nr;
  long args[6];
};

#define P(name, ...)     \
  {                      \
#name, SYS_##name, { \
      __VA_ARGS__        \
    }                    \
  }
constexpr long kReport = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
constexpr long kAnon = MAP_PRIVATE | MAP_ANONYMOUS;
constexpr long kRw = PROT_READ | PROT_WRITE;
constexpr long kProcmapQuery = 0xc0686611;  // PROCMAP_QUERY (fault_access.cpp)
const Probe kProbes[] = {
    P(rt_sigreturn),
    P(rt_sigaction, kSignal),
    P(rt_sigprocmask, SIG_SETMASK),
    P(rt_sigprocmask, SIG_BLOCK),
    P(rt_sigprocmask, SIG_UNBLOCK),
    P(rt_sigpending),
    P(rt_sigtimedwait),
    P(rt_tgsigqueueinfo, kPid, kTid, kSignal),
    P(tgkill, kPid, kTid, kSignal),
    P(sigaltstack),
    P(gettid),
    P(getpid),
    P(getppid),
    P(getuid),
    P(geteuid),
    P(uname),
    P(prctl, PR_GET_NAME),
    P(clock_gettime, CLOCK_MONOTONIC),
    P(clock_gettime, CLOCK_REALTIME),
    P(clock_nanosleep, CLOCK_REALTIME),
    P(sched_yield),
    P(sched_getaffinity, kTid),
    P(futex, 0, 0 /*FUTEX_WAIT*/),
    P(futex, 0, 1 /*FUTEX_WAKE*/),
    P(getrandom),
    P(timer_create, CLOCK_MONOTONIC),
    P(timer_settime),
    P(timer_delete),
    P(process_vm_readv, kPid),
    P(mmap, 0, 0, kRw, kAnon, -1, 0),
    P(mprotect, 0, 0, PROT_NONE),
    P(mprotect, 0, 0, kRw),
    P(munmap),
    P(madvise, 0, 0, MADV_DONTNEED),
    P(openat, AT_FDCWD, 0, O_RDONLY | O_CLOEXEC),
    P(openat, AT_FDCWD, 0, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
    P(openat, AT_FDCWD, 0, kReport, 0600),
    P(read),
    P(pread64),
    P(write),
    P(pwrite64),
    P(close),
    P(fsync),
    P(fcntl, 0, F_GETFD),
    P(fcntl, 0, F_GETFL),
    P(fcntl, 0, F_DUPFD_CLOEXEC),
    P(newfstatat),
    P(fstatfs),
    P(getdents64),
    P(getcwd),
    P(readlinkat, AT_FDCWD),
    P(renameat2, AT_FDCWD, 0, AT_FDCWD),
    P(linkat, AT_FDCWD, 0, AT_FDCWD),
    P(unlinkat, AT_FDCWD),
    P(ioctl, 0, kProcmapQuery),
    P(ppoll),
    P(exit_group),
    P(exit),
#ifdef SYS_fstat
    P(fstat),
#endif
#ifdef SYS_readlink
    P(readlink),
#endif
#ifdef SYS_renameat
    P(renameat, AT_FDCWD, 0, AT_FDCWD),
#endif
#ifdef SYS_poll
    P(poll),
#endif
#ifdef SYS_open
    P(open, 0, O_RDONLY | O_CLOEXEC),
#endif
};
#undef P
// The fallbacks, each made only when the call it stands in for is refused
// (the pipe when process_vm_readv is, alarm when the POSIX timer is).
struct Fallback {
  char name[12];
  long nr;
  char of[20];
};
const Fallback kFallbacks[] = {
    {"pipe2", SYS_pipe2, "process_vm_readv"},
    {"setitimer", SYS_setitimer, "timer_create"},
#ifdef SYS_alarm
    {"alarm", SYS_alarm, "timer_create"},
#endif
};

// The signals the crash path sends or (re)installs: the fatal ones, the
// thread-stack request, the dump signal, the watchdog's SIGALRM.
int signals_sent(int* out, int cap) {
  int n = 0;
  auto add = [&](int s) {
    if (s > 0 && n < cap) out[n++] = s;
  };
  static const int kFixed[] = {SIGSEGV, SIGBUS, SIGILL,  SIGFPE,  SIGABRT,
                               SIGTRAP, SIGSYS, SIGALRM, SIGTERM, SIGINT};
  for (int s : kFixed) add(s);
  add(g_crash.config.thread_signal > 0 ? g_crash.config.thread_signal : SIGRTMAX - 3);
  add(g_crash.config.dump_signal);
  return n;
}

uint32_t load_word(const seccomp_data& d, uint32_t off) {
  uint32_t v;
  __builtin_memcpy(&v, reinterpret_cast<const char*>(&d) + off, 4);
  return v;
}

SeccompVerdict verdict_of(uint32_t ret) {
  switch (ret & SECCOMP_RET_ACTION_FULL) {
    case SECCOMP_RET_ALLOW:
    case SECCOMP_RET_LOG:
    case SECCOMP_RET_USER_NOTIF:  // a supervisor answers: it does not kill
      return SeccompVerdict::kAllow;
    case SECCOMP_RET_ERRNO:
    case SECCOMP_RET_TRACE:  // ENOSYS without a tracer
      return SeccompVerdict::kRefuse;
    default:  // KILL_PROCESS, KILL_THREAD, TRAP, and what the kernel does not know
      return SeccompVerdict::kFatal;
  }
}

// Answers with the worse of two verdicts (a stack of filters: the kernel
// takes the strictest).
SeccompVerdict worse(SeccompVerdict a, SeccompVerdict b) {
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

// The verdict on system call nr with args, every argument that stands for
// an id or a signal tried with each value it takes.
SeccompVerdict judge(const sock_filter* prog, unsigned n, bool strict, long nr, const long* args) {
  if (strict) {
    bool ok = nr == SYS_read || nr == SYS_write || nr == SYS_exit || nr == SYS_rt_sigreturn;
    return ok ? SeccompVerdict::kAllow : SeccompVerdict::kFatal;
  }
  int sigs[16];
  int nsigs = signals_sent(sigs, 16);
  bool has_signal = false;
  for (int i = 0; i < 6; ++i) has_signal |= args[i] == kSignal;
  SeccompVerdict v = SeccompVerdict::kAllow;
  for (int k = 0; k < (has_signal ? nsigs : 1); ++k) {
    seccomp_data d = {};
    d.nr = static_cast<int>(nr);
    d.arch = faultline::core::kArchAudit;
    for (int i = 0; i < 6; ++i) {
      long a = args[i];
      if (a == kPid) a = faultline::core::sys_getpid();
      if (a == kTid) a = faultline::core::sys_gettid();
      if (a == kSignal) a = sigs[k];
      d.args[i] = static_cast<uint64_t>(a);
    }
    SeccompVerdict r = seccomp_evaluate(prog, n, d);
    if (r == SeccompVerdict::kInvalid) return r;
    v = worse(v, r);
  }
  return v;
}

char g_stood_down[64];

// Stepping aside: faultline's handlers give way to the program's, as
// faultline_uninstall() does, and a later install is refused. `call`: the
// system call the filter makes fatal ("strict mode": all but four).
void stand_down(const char* call) {
  size_t n = 0;
  for (; call[n] && n + 1 < sizeof g_stood_down; ++n) g_stood_down[n] = call[n];
  g_stood_down[n] = '\0';
  if (!g_crash.installed) return;
  if (g_crash.config.write_stderr) {
    faultline::core::raw_log("faultline: seccomp makes system calls faultline needs fatal (",
                             g_stood_down,
                             "); crash reports are off in this process, so that a crash ends "
                             "as it would without faultline\n");
  }
  faultline_uninstall();
}

// Copies n bytes of the caller's memory at addr without faulting on a bad
// pointer (the kernel would answer EFAULT): through a pipe, not
// process_vm_readv, which a filter already in place may kill.
bool read_caller(void* dst, uintptr_t addr, size_t n) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  bool ok = true;
  for (size_t done = 0; ok && done < n;) {
    size_t chunk = n - done < 4096 ? n - done : 4096;
    ok = write(fds[1], reinterpret_cast<const void*>(addr + done), chunk) ==
             static_cast<ssize_t>(chunk) &&
         read(fds[0], static_cast<char*>(dst) + done, chunk) == static_cast<ssize_t>(chunk);
    done += chunk;
  }
  close(fds[0]);
  close(fds[1]);
  return ok;
}

}  // namespace

SeccompVerdict seccomp_evaluate(const sock_filter* prog, unsigned n, const seccomp_data& data) {
  if (n == 0 || n > BPF_MAXINSNS) return SeccompVerdict::kInvalid;
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
  for (unsigned pc = 0; pc < n; ++pc) {
    const sock_filter& f = prog[pc];
    uint32_t k = f.k;
    switch (BPF_CLASS(f.code)) {
      case BPF_LD:
      case BPF_LDX: {
        uint32_t v;
        switch (BPF_MODE(f.code)) {
          case BPF_ABS:
            if (BPF_CLASS(f.code) != BPF_LD || BPF_SIZE(f.code) != BPF_W || (k & 3) ||
                k >= sizeof(seccomp_data)) {
              return SeccompVerdict::kInvalid;
            }
            v = load_word(data, k);
            break;
          case BPF_IMM:
            v = k;
            break;
          case BPF_MEM:
            if (k >= BPF_MEMWORDS) return SeccompVerdict::kInvalid;
            v = mem[k];
            break;
          case BPF_LEN:
            v = sizeof(seccomp_data);
            break;
          default:
            return SeccompVerdict::kInvalid;
        }
        (BPF_CLASS(f.code) == BPF_LD ? a : x) = v;
        break;
      }
      case BPF_ST:
      case BPF_STX:
        if (k >= BPF_MEMWORDS) return SeccompVerdict::kInvalid;
        mem[k] = BPF_CLASS(f.code) == BPF_ST ? a : x;
        break;
      case BPF_ALU: {
        uint32_t s = BPF_SRC(f.code) == BPF_X ? x : k;
        switch (BPF_OP(f.code)) {
          case BPF_ADD:
            a += s;
            break;
          case BPF_SUB:
            a -= s;
            break;
          case BPF_MUL:
            a *= s;
            break;
          case BPF_DIV:
            if (s == 0) return verdict_of(0);  // the program ends, returning 0
            a /= s;
            break;
          case BPF_MOD:
            if (s == 0) return verdict_of(0);
            a %= s;
            break;
          case BPF_OR:
            a |= s;
            break;
          case BPF_AND:
            a &= s;
            break;
          case BPF_XOR:
            a ^= s;
            break;
          case BPF_LSH:
            a = s < 32 ? a << s : 0;
            break;
          case BPF_RSH:
            a = s < 32 ? a >> s : 0;
            break;
          case BPF_NEG:
            a = 0u - a;
            break;
          default:
            return SeccompVerdict::kInvalid;
        }
        break;
      }
      case BPF_JMP: {
        unsigned next;
        if (BPF_OP(f.code) == BPF_JA) {
          next = pc + 1 + k;
        } else {
          uint32_t s = BPF_SRC(f.code) == BPF_X ? x : k;
          bool taken;
          switch (BPF_OP(f.code)) {
            case BPF_JEQ:
              taken = a == s;
              break;
            case BPF_JGT:
              taken = a > s;
              break;
            case BPF_JGE:
              taken = a >= s;
              break;
            case BPF_JSET:
              taken = (a & s) != 0;
              break;
            default:
              return SeccompVerdict::kInvalid;
          }
          next = pc + 1 + (taken ? f.jt : f.jf);
        }
        if (next >= n || next <= pc) return SeccompVerdict::kInvalid;
        pc = next - 1;
        break;
      }
      case BPF_RET:
        if (BPF_RVAL(f.code) == BPF_K) return verdict_of(k);
        if (BPF_RVAL(f.code) == BPF_A) return verdict_of(a);
        return SeccompVerdict::kInvalid;
      case BPF_MISC:
        if (BPF_MISCOP(f.code) == BPF_TAX) {
          x = a;
        } else if (BPF_MISCOP(f.code) == BPF_TXA) {
          a = x;
        } else {
          return SeccompVerdict::kInvalid;
        }
        break;
      default:
        return SeccompVerdict::kInvalid;
    }
  }
  return SeccompVerdict::kInvalid;  // ran off the end: the kernel refuses it
}

const char* seccomp_fatal_call(const sock_filter* prog, unsigned n, bool strict) {
  const char* refused[8] = {};
  int nrefused = 0;
  for (const Probe& p : kProbes) {
    SeccompVerdict v = judge(prog, n, strict, p.nr, p.args);
    if (v == SeccompVerdict::kInvalid) return nullptr;  // the kernel refuses the filter
    if (v == SeccompVerdict::kFatal) return p.name;
    if (v == SeccompVerdict::kRefuse && nrefused < 8) refused[nrefused++] = p.name;
  }
  static const long kNoArgs[6] = {};
  for (const Fallback& f : kFallbacks) {
    bool needed = false;
    for (int i = 0; i < nrefused; ++i) {
      const char* a = refused[i];
      const char* b = f.of;
      while (*a && *a == *b) ++a, ++b;
      needed |= *a == *b;
    }
    if (needed && judge(prog, n, strict, f.nr, kNoArgs) == SeccompVerdict::kFatal) return f.name;
  }
  return nullptr;
}

void seccomp_before_set(bool strict, uintptr_t prog_addr) {
  if (g_stood_down[0]) return;
  if (strict) {
    stand_down("strict mode");
    return;
  }
  sock_fprog fprog;
  if (!prog_addr || !read_caller(&fprog, prog_addr, sizeof fprog)) return;
  if (fprog.len == 0 || fprog.len > BPF_MAXINSNS || !fprog.filter) return;  // EINVAL, EFAULT
  size_t bytes = fprog.len * sizeof(sock_filter);
  void* copy = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) return;
  auto* filter = static_cast<sock_filter*>(copy);
  if (read_caller(filter, reinterpret_cast<uintptr_t>(fprog.filter), bytes)) {
    if (const char* call = seccomp_fatal_call(filter, fprog.len, false)) stand_down(call);
  }
  munmap(copy, bytes);
}

const char* seccomp_stood_down() {
  return g_stood_down[0] ? g_stood_down : nullptr;
}

}  // namespace faultline::install
