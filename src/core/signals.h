// The signal and si_code tables: one place for names and plain descriptions.
// Async-signal-safe (static tables, lookups only).
#pragma once

namespace faultline::core {

struct SignalInfo {
  int number;
  const char* name;         // "SIGSEGV"
  const char* description;  // "Segmentation fault" (faulthandler's wording)
};

struct SignalCodeInfo {
  int signo;  // 0: applies to any signal
  int code;
  const char* name;         // "SEGV_MAPERR"
  const char* description;  // "address not mapped to object"
};

// nullptr when unknown.
const SignalInfo* find_signal(int signo);
const SignalCodeInfo* find_signal_code(int signo, int code);
// Parses "SIGSEGV", "SEGV" or "11" into a signal number; 0 if unknown.
int parse_signal(const char* s);

// The signals faultline handles by default.
extern const int kFatalSignals[];
extern const int kFatalSignalCount;

// True if this si_code means the signal was sent by a process (kill, tgkill,
// raise, sigqueue): there is a sender pid and no fault address.
bool signal_sent_by_process(int code);

}  // namespace faultline::core
