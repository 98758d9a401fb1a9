// faultline's own sigaction calls. With FAULTLINE_STAY_IN_FRONT the library
// interposes sigaction() (src/install/sigaction_hook.cpp) to keep its handlers in front
// of the program's; its own calls must reach libc's directly. Async-signal-
// safe: an indirect call through a pointer set at install.
#pragma once

#include <signal.h>

namespace faultline::core {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
extern SigactionFn g_real_sigaction;
// Set at install by src/install/sigaction_hook.h's resolve_real_sigaction.

inline int real_sigaction(int signo, const struct sigaction* act, struct sigaction* old) {
  return g_real_sigaction ? g_real_sigaction(signo, act, old) : ::sigaction(signo, act, old);
}

}  // namespace faultline::core
