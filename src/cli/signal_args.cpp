#include "cli/signal_args.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/base/rt_signal.h"
#include "report/render.h"

namespace faultline::cli {
namespace {

// The words of FAULTLINE_SIGNALS as the library splits it ("SEGV,BUS 7").
std::vector<std::string> signal_words(const std::string& list) {
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    if (c != ',' && c != ' ') {
      word += c;
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  return words;
}

}  // namespace

// Signal names both ways through glibc's own table (sigabbrev_np), so that
// "USR2", "SIGUSR2" and "12" all work.
int parse_signal(const std::string& text) {
  if (text.empty()) return 0;
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    // At most 3 digits: atoi of 4294967297 would wrap to 1.
    int n = text.size() <= 3 ? std::atoi(text.c_str()) : 0;
    return n > 0 && n < NSIG ? n : 0;
  }
  std::string name = text.rfind("SIG", 0) == 0 ? text.substr(3) : text;
  for (int s = 1; s < NSIG; ++s) {
    const char* abbrev = sigabbrev_np(s);
    if (abbrev && name == abbrev) return s;
  }
  // glibc names no real-time signal: SIGRTMIN+2, RTMAX-3 as kill -l has them.
  return faultline::core::parse_rt_signal_name(text.c_str());
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : fmt::format("signal {}", sig);
}

// Empty when every signal of the list is one the library can take (1-63,
// not SIGKILL or SIGSTOP), else why not. Checked here so that `run` stops
// with the reason instead of the library warning at start and handling its
// default set.
std::string bad_signal_list(const std::string& list) {
  std::vector<std::string> words = signal_words(list);
  for (const std::string& word : words) {
    int s = parse_signal(word);
    if (s == 0) return fmt::format("unknown signal \"{}\"", report::escape_controls(word));
    if (s == SIGKILL || s == SIGSTOP) {
      return fmt::format("{} cannot be caught", report::escape_controls(word));
    }
    if (s >= faultline::core::kRtSignalMax) {
      return fmt::format("{}: signal 64 (SIGRTMAX) cannot be used: the library takes 1 to 63",
                         word);
    }
  }
  return words.empty() ? "no signal named" : std::string();
}

// Empty when no signal of the list is the thread signal or the dump signal
// (0: none), else which clashes.
std::string signal_list_clash(const std::string& list, int thread, int dump) {
  for (const std::string& word : signal_words(list)) {
    int s = parse_signal(word);
    if (s > 0 && s == thread) {
      return fmt::format("{} is the thread signal (FAULTLINE_THREAD_SIGNAL)",
                         report::escape_controls(word));
    }
    if (s > 0 && s == dump) {
      return fmt::format("{} is the dump signal (--dump-signal, or --no-dump)",
                         report::escape_controls(word));
    }
  }
  return {};
}

}  // namespace faultline::cli
