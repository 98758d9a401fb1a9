#include "cli/dump_signal_thread.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace faultline::cli {
namespace {

namespace fs = std::filesystem;

// System calls a signal handler's return restarts under SA_RESTART (the
// dump handler's flag) or always (futex), whatever the call's arguments;
// nullptr for the others.
// poll, select, epoll_wait, nanosleep and the like are never restarted; a
// socket call with a timeout is not either, so none is listed.
const char* restarts(long nr) {
  switch (nr) {
    case SYS_read:
      return "read";
    case SYS_write:
      return "write";
    case SYS_readv:
      return "readv";
    case SYS_writev:
      return "writev";
    case SYS_pread64:
      return "pread64";
    case SYS_pwrite64:
      return "pwrite64";
    case SYS_futex:
      return "futex";
    case SYS_wait4:
      return "wait4";
    case SYS_waitid:
      return "waitid";
    default:
      return nullptr;
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
  std::ifstream f(task / "status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("SigBlk:", 0) != 0) continue;
    unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
    return (mask >> (sig - 1)) & 1;
  }
  return true;
}

// What the thread is doing, from /proc/PID/task/TID/syscall: "running", a
// system call's name for the message, or "" where it would be cut short.
std::string restartable_state(const fs::path& task) {
  std::string line = first_line(task / "syscall");
  if (line == "running") return line;
  std::istringstream in(line);
  long nr = -1;
  const char* name = in >> nr && nr >= 0 ? restarts(nr) : nullptr;
  return name ? fmt::format("waiting in {}", name) : "";
}

}  // namespace

int send_dump_signal(pid_t pid, int sig) {
  std::error_code ec;
  // Waiting threads first (what they wait in is known), then running ones.
  pid_t chosen = 0;
  std::string state;
  for (fs::directory_iterator it(fmt::format("/proc/{}/task", pid), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string s;
    try {
      s = restartable_state(it->path());
      if (s.empty() || blocks(it->path(), sig)) continue;
    } catch (const std::exception&) {
      continue;  // gone, or unreadable
    }
    pid_t tid = static_cast<pid_t>(std::atol(it->path().filename().c_str()));
    if (tid <= 0) continue;
    if (!chosen || (state == "running" && s != "running")) {
      chosen = tid;
      state = s;
    }
  }
  if (chosen && syscall(SYS_tgkill, pid, chosen, sig) == 0) {
    fmt::print(stderr,
               "faultline: signalled thread {} of process {} ({}: restarted after the handler, "
               "so it sees no EINTR)\n",
               chosen, pid, state);
    return 0;
  }
  return ::kill(pid, sig) == 0 ? 0 : errno;
}

}  // namespace faultline::cli
