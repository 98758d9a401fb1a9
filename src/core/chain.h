// Handing a fatal signal on once faultline is done with it.
#pragma once

#include <signal.h>

namespace faultline::core {

// Restores the default action for signo and sends it to this thread; the
// process then dies exactly as it would have without us.
[[noreturn]] void die_with_default(int signo);

// Restores the handler that was there before us (or the default) and makes
// the signal happen again where it first happened. Returns true when the
// previous handler is a function of the program's (which may recover),
// false when the process now dies.
bool chain(int signo, siginfo_t* info);

}  // namespace faultline::core
