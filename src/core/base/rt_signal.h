// Real-time signals by name, shared by the settings (core/base/signals.cpp) and
// the command line (cli/signal_args.cpp): "SIGRTMIN+n" and "RTMIN+n" count up
// from glibc's SIGRTMIN (34; glibc keeps 32 and 33), "SIGRTMAX-n" and
// "RTMAX-n" down from SIGRTMAX (64), as bash's kill -l spells them and as
// the README names the thread signal's default (SIGRTMAX-3). Plain code, no
// library calls: the settings are read at install, before main.
#pragma once

namespace faultline::core {

constexpr int kRtSignalMin = 34;
constexpr int kRtSignalMax = 64;

// The signal's number, or 0 when s is not such a name or counts past the
// other end of the range.
inline int parse_rt_signal_name(const char* s) {
  if (s[0] == 'S' && s[1] == 'I' && s[2] == 'G') s += 3;
  if (s[0] != 'R' || s[1] != 'T' || s[2] != 'M') return 0;
  int base = 0, sign = 0;
  if (s[3] == 'I' && s[4] == 'N') {
    base = kRtSignalMin;
    sign = 1;
  } else if (s[3] == 'A' && s[4] == 'X') {
    base = kRtSignalMax;
    sign = -1;
  } else {
    return 0;
  }
  s += 5;
  if (*s == '\0') return base;
  if (*s != (sign > 0 ? '+' : '-')) return 0;
  ++s;
  int n = 0, digits = 0;
  for (; *s >= '0' && *s <= '9'; ++s) {
    if (++digits > 2) return 0;
    n = n * 10 + (*s - '0');
  }
  if (digits == 0 || *s != '\0') return 0;
  int signo = base + sign * n;
  return signo >= kRtSignalMin && signo <= kRtSignalMax ? signo : 0;
}

}  // namespace faultline::core
