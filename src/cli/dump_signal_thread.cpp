#include "cli/dump_signal_thread.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/proc_status.h"

namespace faultline::cli {
namespace {

namespace fs = std::filesystem;

// A system call a thread may wait in when the dump signal lands on it, and
// how safe that is: 0, restarted after the handler whatever its arguments
// (futex always; wait4, waitid under SA_RESTART, the dump handler's flag);
// 1, restarted unless it reads a socket with a receive timeout (then it
// fails with EINTR). Writes are not listed: one that has moved some bytes
// returns a short count. poll, select, epoll_wait, nanosleep and the like
// are never restarted, so none is listed either.
struct Waiting {
  const char* call;
  int rank;
};

std::optional<Waiting> restarts(long nr) {
  switch (nr) {
    case SYS_futex:
      return Waiting{"futex", 0};
    case SYS_wait4:
      return Waiting{"wait4", 0};
    case SYS_waitid:
      return Waiting{"waitid", 0};
    case SYS_read:
      return Waiting{"read", 1};
    case SYS_readv:
      return Waiting{"readv", 1};
    case SYS_pread64:
      return Waiting{"pread64", 1};
    default:
      return std::nullopt;
  }
}

std::string first_line(const fs::path& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// Whether the thread blocks sig (its status's SigBlk); true where that
// cannot be read.
bool blocks(const fs::path& task, int sig) {
  std::optional<unsigned long long> blocked = status_mask(task / "status", "SigBlk");
  return !blocked || has_signal(*blocked, sig);
}

// Where "running" ranks: after every call listed (the thread may be about
// to make any call, a write among them).
constexpr int kRunning = 2;

// What the thread is doing, from /proc/PID/task/TID/syscall: "running" or
// the call it waits in, with its rank; nullopt where it would be cut short.
std::optional<Waiting> restartable_state(const fs::path& task) {
  std::string line = first_line(task / "syscall");
  if (line == "running") return Waiting{"running", kRunning};
  std::istringstream in(line);
  long nr = -1;
  return in >> nr && nr >= 0 ? restarts(nr) : std::nullopt;
}

}  // namespace

int send_dump_signal(pid_t pid, int sig) {
  std::error_code ec;
  // The thread whose state ranks first (futex, wait4, waitid; then read;
  // then running), the first such in the list.
  pid_t chosen = 0;
  Waiting state{};
  for (fs::directory_iterator it(fmt::format("/proc/{}/task", pid), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::optional<Waiting> s;
    try {
      s = restartable_state(it->path());
      if (!s || blocks(it->path(), sig)) continue;
    } catch (const std::exception&) {
      continue;  // gone, or unreadable
    }
    pid_t tid = static_cast<pid_t>(std::atol(it->path().filename().c_str()));
    if (tid <= 0) continue;
    if (!chosen || s->rank < state.rank) {
      chosen = tid;
      state = *s;
    }
  }
  if (chosen && syscall(SYS_tgkill, pid, chosen, sig) == 0) {
    fmt::print(stderr, "faultline: signalled thread {} of process {} ({}{})\n", chosen, pid,
               state.rank == kRunning ? "running" : fmt::format("waiting in {}", state.call),
               state.rank == 0   ? ": restarted after the handler, so it sees no EINTR"
               : state.rank == 1 ? ": restarted after the handler unless it reads a socket "
                                   "with a timeout"
                                 : "");
    return 0;
  }
  return ::kill(pid, sig) == 0 ? 0 : errno;
}

}  // namespace faultline::cli
