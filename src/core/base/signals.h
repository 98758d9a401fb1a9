// The signal and si_code tables: one place for names and plain descriptions.
// Async-signal-safe (static tables, lookups only).
#pragma once

namespace faultline::core {

// The tables hold their text (no pointers): a table of pointers is
// relocated by the loader at every start, a copy-on-write of its pages in
// every process under the preload.
struct SignalInfo {
  int number;
  char name[12];         // "SIGSEGV"
  char description[40];  // "Segmentation fault" (faulthandler's wording)
};

struct SignalCodeInfo {
  int signo;  // 0: applies to any signal
  int code;
  char name[16];         // "SEGV_MAPERR"
  char description[56];  // "address not mapped to object"
};

// nullptr when unknown.
const SignalInfo* find_signal(int signo);
const SignalCodeInfo* find_signal_code(int signo, int code);
// Parses "SIGSEGV", "SEGV", "11", "SIGRTMIN+2" or "RTMAX-3" into a signal
// number; 0 if unknown or past 63 (settings hold signals 1-63).
int parse_signal(const char* s);

// The signals faultline handles by default.
extern const int kFatalSignals[];
extern const int kFatalSignalCount;

// True if this si_code means the signal was sent by a process (kill, tgkill,
// raise, sigqueue): there is a sender pid and no fault address.
bool signal_sent_by_process(int code);

}  // namespace faultline::core
