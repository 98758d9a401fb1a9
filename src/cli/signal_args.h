// Signals named on the command line (`run --signals`, `--dump-signal`,
// `dump --signal`), checked here as the library would read them, so that a
// bad one stops the command with the reason instead of a warning at the
// job's start.
#pragma once

#include <string>

namespace faultline::cli {

// A signal by name or number ("USR2", "SIGUSR2", "12", "SIGRTMIN+2"); 0
// when it names none.
int parse_signal(const std::string& text);

// "SIGUSR2", or "signal N" where glibc has no name.
std::string signal_name(int sig);

// Empty when every signal of the list is one the library can take (1-63,
// not SIGKILL or SIGSTOP), else why not.
std::string bad_signal_list(const std::string& list);

// Empty when no signal of the list is the thread signal or the dump signal
// (0: none), else which clashes.
std::string signal_list_clash(const std::string& list, int thread, int dump);

}  // namespace faultline::cli
