#include "core/base/signals.h"

#include <signal.h>

#include "core/base/rt_signal.h"
#include "core/base/str.h"

namespace faultline::core {

namespace {

const SignalInfo kSignals[] = {
    {SIGHUP, "SIGHUP", "Hangup"},
    {SIGINT, "SIGINT", "Interrupt"},
    {SIGQUIT, "SIGQUIT", "Quit"},
    {SIGILL, "SIGILL", "Illegal instruction"},
    {SIGTRAP, "SIGTRAP", "Trace/breakpoint trap"},
    {SIGABRT, "SIGABRT", "Aborted"},
    {SIGBUS, "SIGBUS", "Bus error"},
    {SIGFPE, "SIGFPE", "Floating-point exception"},
    {SIGKILL, "SIGKILL", "Killed"},
    {SIGUSR1, "SIGUSR1", "User defined signal 1"},
    {SIGSEGV, "SIGSEGV", "Segmentation fault"},
    {SIGUSR2, "SIGUSR2", "User defined signal 2"},
    {SIGPIPE, "SIGPIPE", "Broken pipe"},
    {SIGALRM, "SIGALRM", "Alarm clock"},
    {SIGTERM, "SIGTERM", "Terminated"},
    {SIGSTKFLT, "SIGSTKFLT", "Stack fault"},
    {SIGCHLD, "SIGCHLD", "Child exited"},
    {SIGCONT, "SIGCONT", "Continued"},
    {SIGSTOP, "SIGSTOP", "Stopped (signal)"},
    {SIGTSTP, "SIGTSTP", "Stopped"},
    {SIGTTIN, "SIGTTIN", "Stopped (tty input)"},
    {SIGTTOU, "SIGTTOU", "Stopped (tty output)"},
    {SIGURG, "SIGURG", "Urgent I/O condition"},
    {SIGXCPU, "SIGXCPU", "CPU time limit exceeded"},
    {SIGXFSZ, "SIGXFSZ", "File size limit exceeded"},
    {SIGVTALRM, "SIGVTALRM", "Virtual timer expired"},
    {SIGPROF, "SIGPROF", "Profiling timer expired"},
    {SIGWINCH, "SIGWINCH", "Window changed"},
    {SIGIO, "SIGIO", "I/O possible"},
    {SIGPWR, "SIGPWR", "Power failure"},
    {SIGSYS, "SIGSYS", "Bad system call"},
    // Real-time signals, named from glibc's SIGRTMIN (34: glibc keeps 32 and
    // 33 for itself), as bash's kill -l and strsignal(3) count them.
    {32, "SIG32", "Real-time signal reserved by libc"},
    {33, "SIG33", "Real-time signal reserved by libc"},
    {34, "SIGRTMIN", "Real-time signal 0"},
    {35, "SIGRTMIN+1", "Real-time signal 1"},
    {36, "SIGRTMIN+2", "Real-time signal 2"},
    {37, "SIGRTMIN+3", "Real-time signal 3"},
    {38, "SIGRTMIN+4", "Real-time signal 4"},
    {39, "SIGRTMIN+5", "Real-time signal 5"},
    {40, "SIGRTMIN+6", "Real-time signal 6"},
    {41, "SIGRTMIN+7", "Real-time signal 7"},
    {42, "SIGRTMIN+8", "Real-time signal 8"},
    {43, "SIGRTMIN+9", "Real-time signal 9"},
    {44, "SIGRTMIN+10", "Real-time signal 10"},
    {45, "SIGRTMIN+11", "Real-time signal 11"},
    {46, "SIGRTMIN+12", "Real-time signal 12"},
    {47, "SIGRTMIN+13", "Real-time signal 13"},
    {48, "SIGRTMIN+14", "Real-time signal 14"},
    {49, "SIGRTMIN+15", "Real-time signal 15"},
    {50, "SIGRTMIN+16", "Real-time signal 16"},
    {51, "SIGRTMIN+17", "Real-time signal 17"},
    {52, "SIGRTMIN+18", "Real-time signal 18"},
    {53, "SIGRTMIN+19", "Real-time signal 19"},
    {54, "SIGRTMIN+20", "Real-time signal 20"},
    {55, "SIGRTMIN+21", "Real-time signal 21"},
    {56, "SIGRTMIN+22", "Real-time signal 22"},
    {57, "SIGRTMIN+23", "Real-time signal 23"},
    {58, "SIGRTMIN+24", "Real-time signal 24"},
    {59, "SIGRTMIN+25", "Real-time signal 25"},
    {60, "SIGRTMIN+26", "Real-time signal 26"},
    {61, "SIGRTMIN+27", "Real-time signal 27"},
    {62, "SIGRTMIN+28", "Real-time signal 28"},
    {63, "SIGRTMIN+29", "Real-time signal 29"},
    {64, "SIGRTMIN+30", "Real-time signal 30"},
};

// si_code values. Codes <= 0 (sent by a process) apply to every signal; the
// positive ones are per signal (see sigaction(2)).
const SignalCodeInfo kCodes[] = {
    {0, SI_USER, "SI_USER", "sent by kill or raise"},
    {0, SI_KERNEL, "SI_KERNEL", "sent by the kernel"},
    {0, SI_QUEUE, "SI_QUEUE", "sent by sigqueue"},
    {0, SI_TIMER, "SI_TIMER", "POSIX timer expired"},
    {0, SI_MESGQ, "SI_MESGQ", "POSIX message queue state changed"},
    {0, SI_ASYNCIO, "SI_ASYNCIO", "AIO completed"},
    {0, SI_SIGIO, "SI_SIGIO", "queued SIGIO"},
    {0, SI_TKILL, "SI_TKILL", "sent by tkill or tgkill"},
    {SIGILL, ILL_ILLOPC, "ILL_ILLOPC", "illegal opcode"},
    {SIGILL, ILL_ILLOPN, "ILL_ILLOPN", "illegal operand"},
    {SIGILL, ILL_ILLADR, "ILL_ILLADR", "illegal addressing mode"},
    {SIGILL, ILL_ILLTRP, "ILL_ILLTRP", "illegal trap"},
    {SIGILL, ILL_PRVOPC, "ILL_PRVOPC", "privileged opcode"},
    {SIGILL, ILL_PRVREG, "ILL_PRVREG", "privileged register"},
    {SIGILL, ILL_COPROC, "ILL_COPROC", "coprocessor error"},
    {SIGILL, ILL_BADSTK, "ILL_BADSTK", "internal stack error"},
    {SIGFPE, FPE_INTDIV, "FPE_INTDIV", "integer divide by zero"},
    {SIGFPE, FPE_INTOVF, "FPE_INTOVF", "integer overflow"},
    {SIGFPE, FPE_FLTDIV, "FPE_FLTDIV", "floating-point divide by zero"},
    {SIGFPE, FPE_FLTOVF, "FPE_FLTOVF", "floating-point overflow"},
    {SIGFPE, FPE_FLTUND, "FPE_FLTUND", "floating-point underflow"},
    {SIGFPE, FPE_FLTRES, "FPE_FLTRES", "floating-point inexact result"},
    {SIGFPE, FPE_FLTINV, "FPE_FLTINV", "floating-point invalid operation"},
    {SIGFPE, FPE_FLTSUB, "FPE_FLTSUB", "subscript out of range"},
    {SIGSEGV, SEGV_MAPERR, "SEGV_MAPERR", "address not mapped to object"},
    {SIGSEGV, SEGV_ACCERR, "SEGV_ACCERR", "invalid permissions for mapped object"},
    {SIGSEGV, 3, "SEGV_BNDERR", "failed address bound checks"},
    {SIGSEGV, 4, "SEGV_PKUERR", "access denied by memory protection keys"},
    {SIGBUS, BUS_ADRALN, "BUS_ADRALN", "invalid address alignment"},
    {SIGBUS, BUS_ADRERR, "BUS_ADRERR", "nonexistent physical address"},
    {SIGBUS, BUS_OBJERR, "BUS_OBJERR", "object-specific hardware error"},
    {SIGBUS, 4, "BUS_MCEERR_AR", "hardware memory error consumed on a machine check"},
    {SIGBUS, 5, "BUS_MCEERR_AO", "hardware memory error detected, action optional"},
    {SIGTRAP, TRAP_BRKPT, "TRAP_BRKPT", "process breakpoint"},
    {SIGTRAP, TRAP_TRACE, "TRAP_TRACE", "process trace trap"},
    {SIGTRAP, 3, "TRAP_BRANCH", "process taken branch trap"},
    {SIGTRAP, 4, "TRAP_HWBKPT", "hardware breakpoint or watchpoint"},
};

}  // namespace

const int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
const int kFatalSignalCount = sizeof kFatalSignals / sizeof kFatalSignals[0];

const SignalInfo* find_signal(int signo) {
  for (const auto& s : kSignals) {
    if (s.number == signo) return &s;
  }
  return nullptr;
}

const SignalCodeInfo* find_signal_code(int signo, int code) {
  for (const auto& c : kCodes) {
    if (c.code != code) continue;
    if (code <= 0 ? c.signo == 0 : c.signo == signo) return &c;
  }
  // SI_KERNEL (0x80) is positive but signal-independent.
  if (code == SI_KERNEL) return &kCodes[1];
  return nullptr;
}

int parse_signal(const char* s) {
  int64_t n = 0;
  if (parse_int(s, &n)) return (n > 0 && n < 64) ? static_cast<int>(n) : 0;
  for (const auto& sig : kSignals) {
    // Settings hold signals 1-63 (a bit each).
    if ((str_eq(s, sig.name) || str_eq(s, sig.name + 3)) && sig.number < 64) return sig.number;
  }
  int rt = parse_rt_signal_name(s);  // SIGRTMAX-3, RTMIN+2
  return rt < 64 ? rt : 0;
}

bool signal_sent_by_process(int code) {
  return code <= 0;
}

}  // namespace faultline::core
