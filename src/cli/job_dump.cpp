// faultline job --dump: every local rank of a torchrun job dumped at once.
#include "cli/job_dump.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

namespace faultline::cli {

namespace fs = std::filesystem;

// NAME=value pairs of /proc/PID/environ; nullopt with the errno when unreadable.
std::optional<std::map<std::string, std::string>> environ_of(int pid, int* error) {
  std::string path = fmt::format("/proc/{}/environ", pid);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::string data;
  char buf[65536];
  ssize_t n = fd < 0 ? -1 : 0;
  while (fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
  *error = errno;
  if (fd >= 0) ::close(fd);
  if (n < 0) return std::nullopt;
  std::map<std::string, std::string> env;
  for (size_t at = 0; at < data.size();) {
    size_t end = data.find('\0', at);
    if (end == std::string::npos) end = data.size();
    std::string entry = data.substr(at, end - at);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    at = end + 1;
  }
  return env;
}

nlohmann::json job_of(int pid) {
  int error = 0;
  auto env = environ_of(pid, &error);
  if (!env) return nullptr;
  auto it = env->find("TORCHELASTIC_RUN_ID");
  if (it == env->end() || it->second.empty()) return nullptr;
  // As the library writes it (core/write/job_identity.cpp): a number the
  // launcher gave as text, null when absent or not a number.
  auto number = [&](const char* name) -> nlohmann::json {
    auto v = env->find(name);
    if (v == env->end() || v->second.empty()) return nullptr;
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(v->second.c_str(), &end, 10);
    if (errno || *end) return nullptr;
    return n;
  };
  auto text = [&](const char* name) -> nlohmann::json {
    auto v = env->find(name);
    return v == env->end() || v->second.empty() ? nlohmann::json(nullptr)
                                                : nlohmann::json(v->second);
  };
  struct utsname u;
  return {{"launcher", "torchrun"},
          {"run_id", it->second},
          {"rank", number("RANK")},
          {"local_rank", number("LOCAL_RANK")},
          {"world_size", number("WORLD_SIZE")},
          {"group_rank", number("GROUP_RANK")},
          {"restart_count", number("TORCHELASTIC_RESTART_COUNT")},
          {"host", uname(&u) == 0 ? nlohmann::json(u.nodename) : nlohmann::json(nullptr)},
          {"master_addr", text("MASTER_ADDR")},
          {"master_port", number("MASTER_PORT")}};
}

namespace {

int parent_of(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return 0;
  int ppid = 0;
  char state = 0;
  return std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 ? ppid : 0;
}

// Runs `faultline dump PID --print-path`; its stdout and stderr come back
// through `out` and `err` once it ends.
struct Child {
  int pid = 0, target = 0;
  int out = -1, err = -1;
};

Child start_dump(int target, double timeout_s) {
  Child c;
  c.target = target;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return c;
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    return c;
  }
  std::string pid = std::to_string(target), timeout = fmt::format("{}", timeout_s);
  int child = ::fork();
  if (child == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    const char* argv[] = {"faultline", "dump",          pid.c_str(), "--print-path",
                          "--timeout", timeout.c_str(), nullptr};
    ::execv("/proc/self/exe", const_cast<char* const*>(argv));
    _exit(127);
  }
  ::close(out[1]), ::close(err[1]);
  c.pid = child;
  c.out = out[0], c.err = err[0];
  if (child < 0) {
    ::close(out[0]), ::close(err[0]);
    c.out = c.err = -1;
  }
  return c;
}

// Both pipes to their end, read together so that neither fills up.
void drain(Child& c, std::string* out, std::string* err) {
  struct pollfd fds[2] = {{c.out, POLLIN, 0}, {c.err, POLLIN, 0}};
  std::string* to[2] = {out, err};
  int open = 2;
  while (open > 0 && ::poll(fds, 2, -1) >= 0) {
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        to[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

// Copies `from` into `dir` under its own name; never replaces a file nor
// follows a link there. "" on success, else why not.
std::string copy_into(const std::string& from, const std::string& dir) {
  fs::path to = fs::path(dir) / fs::path(from).filename();
  std::error_code ec;
  if (fs::equivalent(fs::path(from).parent_path(), dir, ec)) return "";  // already there
  std::ifstream in(from, std::ios::binary);
  if (!in) return fmt::format("cannot read {}", from);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return fmt::format("cannot create {}: {}", to.string(), std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  bool ok = done == data.size() && ::fsync(fd) == 0;
  ::close(fd);
  return ok ? "" : fmt::format("cannot write {}", to.string());
}

}  // namespace

std::vector<int> job_processes(const std::string& run_id,
                               std::vector<std::pair<int, std::string>>* unreadable) {
  std::map<int, std::string> ranks;  // pid -> RANK
  std::error_code ec;
  const int self = ::getpid();
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    int pid = std::atoi(name.c_str());
    if (pid == self) continue;
    int error = 0;
    auto env = environ_of(pid, &error);
    if (!env) {
      if (error != ENOENT && error != ESRCH) unreadable->push_back({pid, std::strerror(error)});
      continue;
    }
    auto id = env->find("TORCHELASTIC_RUN_ID");
    auto rank = env->find("RANK");
    if (id != env->end() && id->second == run_id && rank != env->end()) ranks[pid] = rank->second;
  }
  std::vector<int> out;
  for (const auto& [pid, rank] : ranks) {
    auto parent = ranks.find(parent_of(pid));
    if (parent != ranks.end() && parent->second == rank) continue;  // a rank's own child
    out.push_back(pid);
  }
  return out;
}

JobDump dump_job(const std::vector<int>& pids, const std::string& dir, double timeout_s) {
  JobDump d;
  std::vector<Child> children;
  for (int pid : pids) children.push_back(start_dump(pid, timeout_s));
  for (Child& c : children) {
    if (c.pid <= 0) {
      d.failed.push_back({c.target, "cannot start `faultline dump`"});
      continue;
    }
    std::string out, err;
    drain(c, &out, &err);
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    while (!err.empty() && err.back() == '\n') err.pop_back();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty()) {
      std::string why = err.rfind("faultline: ", 0) == 0 ? err.substr(11) : err;
      d.failed.push_back({c.target, why.empty() ? "`faultline dump` failed" : why});
      continue;
    }
    std::string copied = copy_into(out, dir);
    if (copied.empty()) {
      d.dumped.push_back(c.target);
    } else {
      d.failed.push_back({c.target, copied});
    }
  }
  return d;
}

}  // namespace faultline::cli
