// Handing a fatal signal on once faultline is done with it.
#pragma once

#include <signal.h>
#include <stdint.h>

#include "core/crash_state.h"

namespace faultline::core {

// Restores the default action for signo and sends it to this thread; the
// process then dies exactly as it would have without us.
[[noreturn]] void die_with_default(int signo);

// Restores the handler that was there before us (or the default) and makes
// the signal happen again where it first happened. Returns true when the
// previous handler is a function of the program's (which may recover),
// false when the process now dies.
bool chain(int signo, siginfo_t* info);

// Sends signo to this thread (or, `to_process`, to the process) again with
// the siginfo it first came with (nullptr: a plain tgkill).
void send_again(int signo, const siginfo_t* info, bool to_process);

// Comparing dispositions (HandlerFn: crash_state.h).
HandlerFn handler_fn(const struct sigaction& a);
// Whether two dispositions run the same function.
bool same_function(const struct sigaction& a, const HandlerFn& b);
bool same_function(const struct sigaction& a, const struct sigaction& b);

}  // namespace faultline::core
