// faultline run -- CMD...: runs a command with libfaultline.so preloaded.
// faultline dump PID: asks a running process for a live report of all threads.
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/report_input.h"
#include "cli/upload.h"
#include "core/base/rt_signal.h"
#include "report/render.h"

extern char** environ;

namespace faultline::cli {

namespace fs = std::filesystem;

namespace {

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

// Empty when path is a faultline library this program can load, else why
// not: the loader would refuse a file that is not a shared library for this
// machine with a message and run the command without faultline, and
// another library (--lib libz.so) would load and do nothing. Loaded in a
// child that ends at once: where this program itself runs under a preload
// of faultline (a nested `faultline run`, /etc/ld.so.preload), the
// library's constructor would install its handlers here, and dlclose
// leave them pointing into unmapped code.
std::string not_a_faultline_library(const std::string& path) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  std::fflush(nullptr);
  pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (child == 0) {
    close(fds[0]);
    const char* why = nullptr;
    if (void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL); !h) {
      why = dlerror();
      if (!why) why = "cannot be loaded";
    } else if (!dlsym(h, "faultline_install")) {
      why = "not libfaultline.so (it has no faultline_install)";
    }
    if (why) {
      ssize_t ignored = write(fds[1], why, std::strlen(why));
      (void)ignored;
    }
    _exit(why ? 1 : 0);
  }
  close(fds[1]);
  std::string why;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    why.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  return why.empty() ? std::string("cannot be loaded (the check ended abnormally)") : why;
}

std::string self_exe_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// libfaultline.so: --lib, else beside an installed faultline (bin/../lib), else
// the build tree this faultline was built in.
std::string find_library(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  std::vector<std::string> candidates;
  std::string dir = self_exe_dir();
  if (!dir.empty()) {
    candidates.push_back(dir + "/" FAULTLINE_INSTALL_LIB_REL "/libfaultline.so");
    candidates.push_back(dir + "/../lib/libfaultline.so");
  }
#ifdef FAULTLINE_BUILD_LIB_DIR
  candidates.push_back(FAULTLINE_BUILD_LIB_DIR "/libfaultline.so");
#endif
  for (const std::string& c : candidates) {
    if (::access(c.c_str(), R_OK) == 0) return fs::weakly_canonical(c).string();
  }
  return "";
}

// Report files (final names only) in `dir`, each with what identifies its
// current content: a report rewritten under the same name (two reports of one
// thread within a second share a name) counts as new.
using ReportListing = std::map<std::string, std::pair<ino_t, int64_t>>;

ReportListing list_reports(const std::string& dir) {
  ReportListing out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("faultline-", 0) != 0 || it->path().extension() != ".json") continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) continue;
    out[name] = {st.st_ino,
                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

// Names in `now` that are not in `before`, or whose file changed since.
std::vector<std::string> new_reports(const ReportListing& before, const ReportListing& now) {
  std::vector<std::string> out;
  for (const auto& [name, id] : now) {
    auto it = before.find(name);
    if (it == before.end() || it->second != id) out.push_back(name);
  }
  return out;
}

std::string absolute_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir.empty() ? "." : dir, ec);
  if (ec) return dir;
  std::string out = p.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// The child of `faultline run`, for forwarding signals. Written before any
// handler that reads it is installed.
volatile sig_atomic_t g_child = 0;

void forward_signal(int sig) {
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

// Ends this process the way the child ended: by the same signal, so the shell
// sees 128+N. The core limit is set to 0 first: the child already dumped core
// if it was going to, and a core of faultline itself would only mislead.
[[noreturn]] void die_like(int sig) {
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  // A signal whose default action is to ignore (SIGCHLD, SIGWINCH...) returns here.
  std::exit(128 + sig);
}

struct RunArgs {
  std::vector<std::string> command;
  std::string dir;
  std::string signals;
  std::string dump_signal = "SIGUSR2";
  bool no_dump = false;
  bool no_stderr = false;
  int max_frames = 0;
  int watchdog = -1;
  int timeout = 0;
  bool timeout_exit = false;
  std::vector<std::string> env;
  std::string lib;
  bool quiet = false;
  std::string upload;  // Sentry DSN, "" for none
};

// Prints the new reports in `dir`; returns their paths.
std::vector<std::string> print_new_reports(const std::string& dir, const ReportListing& before,
                                           bool quiet) {
  std::vector<std::string> paths;
  for (const std::string& name : new_reports(before, list_reports(dir))) {
    std::string path = (fs::path(dir) / name).string();
    paths.push_back(path);
    std::string what;
    try {
      report::Report r = report::load_report(path);
      what = r.diagnosis.summary.empty() ? r.kind : r.diagnosis.summary;
    } catch (const std::exception& e) {
      what = "(unreadable report)";
    }
    if (!quiet) {
      fmt::print(stderr, "faultline: report {}\nfaultline:   {}\n", report::escape_controls(path),
                 report::escape_controls(what));
    }
  }
  return paths;
}

int run_command(const RunArgs& a) {
  std::string lib = find_library(a.lib);
  if (lib.empty()) {
    fmt::print(stderr,
               "faultline: cannot find libfaultline.so (looked beside {}; pass --lib PATH)\n",
               self_exe_dir());
    return kExitFailed;
  }
  if (::access(lib.c_str(), R_OK) != 0) {
    fmt::print(stderr, "faultline: {}: {}\n", lib, std::strerror(errno));
    return kExitFailed;
  }
  if (std::string why = not_a_faultline_library(lib); !why.empty()) {
    fmt::print(stderr, "faultline: --lib {}: {}; the command would run without faultline\n",
               report::escape_controls(lib), report::escape_controls(why));
    return kExitFailed;
  }
  const char* env_dir = std::getenv("FAULTLINE_DIR");
  std::string dir = absolute_dir(!a.dir.empty() ? a.dir : env_dir ? env_dir : ".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    bool exists = fs::exists(dir, ec);
    fmt::print(stderr, "faultline: report directory {} {}\n", report::escape_controls(dir),
               exists ? "is not a directory" : "does not exist");
    return kExitFailed;
  }

  // The environment of the child: ours, plus the preload and the options.
  std::string preload = lib;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(" ") + old;
  std::vector<std::pair<std::string, std::string>> set = {{"LD_PRELOAD", preload},
                                                          {"FAULTLINE_DIR", dir}};
  if (!a.signals.empty()) set.emplace_back("FAULTLINE_SIGNALS", a.signals);
  if (a.no_stderr) set.emplace_back("FAULTLINE_STDERR", "0");
  if (a.max_frames > 0) set.emplace_back("FAULTLINE_MAX_FRAMES", std::to_string(a.max_frames));
  if (a.watchdog >= 0) set.emplace_back("FAULTLINE_WATCHDOG", std::to_string(a.watchdog));
  // Reports that go to Sentry carry their minidump (an event.minidump
  // attachment), unless the environment says otherwise.
  if (!a.upload.empty() && !std::getenv("FAULTLINE_MINIDUMP"))
    set.emplace_back("FAULTLINE_MINIDUMP", "1");
  set.emplace_back("FAULTLINE_DUMP_SIGNAL", a.no_dump ? "0" : a.dump_signal);
  if (a.timeout > 0) {
    set.emplace_back("FAULTLINE_DUMP_AFTER", std::to_string(a.timeout));
    if (a.timeout_exit) set.emplace_back("FAULTLINE_DUMP_AFTER_EXIT", "1");
  }
  for (const std::string& kv : a.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      fmt::print(stderr, "faultline: --env wants NAME=VALUE, got \"{}\"\n", kv);
      return kExitUsage;
    }
    set.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const auto& [k, v] : set) setenv(k.c_str(), v.c_str(), 1);

  std::vector<char*> argv;
  for (const std::string& s : a.command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);

  ReportListing before = list_reports(dir);
  std::fflush(nullptr);
  // exec failures come back through a close-on-exec pipe: errno, or EOF on success.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    fmt::print(stderr, "faultline: pipe: {}\n", std::strerror(errno));
    return kExitFailed;
  }
  pid_t child = fork();
  if (child < 0) {
    fmt::print(stderr, "faultline: fork: {}\n", std::strerror(errno));
    return kExitFailed;
  }
  if (child == 0) {
    close(pipefd[0]);
    execvp(argv[0], argv.data());
    int err = errno;
    ssize_t ignored = write(pipefd[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  close(pipefd[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(pipefd[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  close(pipefd[0]);

  // While the child runs: keyboard signals reach it directly (same process
  // group), so ignore them here; a signal sent to faultline alone (a batch
  // system's SIGTERM, `kill -USR2` for a dump) is passed on to the child.
  g_child = child;
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGQUIT, SIG_IGN);
  struct sigaction fwd = {};
  fwd.sa_handler = forward_signal;
  sigemptyset(&fwd.sa_mask);
  fwd.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) sigaction(sig, &fwd, nullptr);

  int wstatus = 0;
  while (waitpid(child, &wstatus, 0) < 0) {
    if (errno != EINTR) {
      fmt::print(stderr, "faultline: waitpid: {}\n", std::strerror(errno));
      return kExitFailed;
    }
  }
  g_child = 0;
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    fmt::print(stderr, "faultline: cannot run {}: {}\n", a.command[0], std::strerror(exec_errno));
    return exec_errno == ENOENT ? 127 : 126;  // as shells do
  }
  std::vector<std::string> reports = print_new_reports(dir, before, a.quiet);
  // The job's exit status stays the job's: a failed upload is spooled and said on stderr.
  if (!a.upload.empty() && !reports.empty()) upload_after_run(a.upload, reports);
  if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    if (!a.quiet) {
      fmt::print(stderr, "faultline: {} was killed by {}\n", a.command[0], signal_name(sig));
    }
    std::fflush(nullptr);
    die_like(sig);
  }
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : kExitFailed;
}

struct DumpArgs {
  int pid = 0;
  std::string signal = "SIGUSR2";
  double timeout = 10;
  std::string dir;
  bool force = false;
  bool faulthandler = false;
  std::string color = "auto";
  bool print_path = false;
};

// The value of NAME in /proc/PID/environ, or nullopt (not set or not readable).
std::optional<std::string> proc_env(int pid, const std::string& name) {
  std::ifstream in(fmt::format("/proc/{}/environ", pid), std::ios::binary);
  if (!in) return std::nullopt;
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

// The directories process `pid` holds open (the library keeps its report
// directory open from the start), as /proc/PID/fd shows their paths.
std::vector<std::string> open_directories(int pid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(fmt::format("/proc/{}/fd", pid), ec), end; !ec && it != end;
       it.increment(ec)) {
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    std::error_code e2;
    fs::path target = fs::read_symlink(it->path(), e2);
    if (!e2 && target.is_absolute()) out.push_back(target.lexically_normal().string());
  }
  return out;
}

// Where process `pid` writes reports: its FAULTLINE_DIR when absolute; when
// relative, the one open directory that ends with it (the job may have
// changed directory since it opened it), else that path under its working
// directory; our own view when /proc is closed to us.
std::string target_report_dir(int pid) {
  std::error_code ec;
  fs::path cwd = fs::read_symlink(fmt::format("/proc/{}/cwd", pid), ec);
  auto dir = proc_env(pid, "FAULTLINE_DIR");
  if (dir && !dir->empty() && (*dir)[0] == '/') return fs::path(*dir).lexically_normal().string();
  if (!ec) {
    if (dir && !dir->empty()) {
      std::string rel = fs::path(*dir).lexically_normal().string();
      while (rel.size() > 1 && rel.back() == '/') rel.pop_back();
      std::set<std::string> matches;
      if (rel != "." && rel.rfind("..", 0) != 0) {
        for (const std::string& d : open_directories(pid)) {
          if (d.size() > rel.size() && d.compare(d.size() - rel.size(), rel.size(), rel) == 0 &&
              d[d.size() - rel.size() - 1] == '/')
            matches.insert(d);
        }
      }
      if (matches.size() == 1) return *matches.begin();
      return (cwd / *dir).lexically_normal().string();
    }
    return cwd.string();
  }
  const char* env_dir = std::getenv("FAULTLINE_DIR");
  return absolute_dir(env_dir ? env_dir : ".");
}

bool has_faultline_loaded(int pid) {
  std::ifstream maps(fmt::format("/proc/{}/maps", pid));
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libfaultline") != std::string::npos) return true;
  }
  return false;
}

// Whether process `pid` has a handler for `sig` (SigCgt of /proc/PID/status);
// nullopt when that cannot be read. A loaded libfaultline.so is not enough:
// preloaded without FAULTLINE_DUMP it leaves SIGUSR2 to its default action,
// which ends the process.
std::optional<bool> catches_signal(int pid, int sig) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    std::string hex = line.substr(7);
    hex.erase(0, hex.find_first_not_of(" \t"));
    errno = 0;
    char* end = nullptr;
    unsigned long long mask = std::strtoull(hex.c_str(), &end, 16);
    if (errno != 0 || end == hex.c_str()) return std::nullopt;
    return ((mask >> (sig - 1)) & 1) != 0;
  }
  return std::nullopt;
}

int dump_process(const DumpArgs& a) {
  int sig = parse_signal(a.signal);
  if (sig == 0) {
    fmt::print(stderr, "faultline: unknown signal \"{}\"\n", a.signal);
    return kExitUsage;
  }
  if (::kill(a.pid, 0) != 0 && errno == ESRCH) {
    fmt::print(stderr, "faultline: no process {}\n", a.pid);
    return kExitFailed;
  }
  // Without faultline's handler most signals (SIGUSR2 included) terminate the
  // process: never send one blindly. The library being mapped is not enough;
  // the signal must be caught.
  if (!a.force && !has_faultline_loaded(a.pid)) {
    fmt::print(stderr,
               "faultline: process {} has not loaded libfaultline.so, and {} would likely kill "
               "it; start it with `faultline run`, or pass --force\n",
               a.pid, signal_name(sig));
    return kExitFailed;
  }
  if (!a.force && catches_signal(a.pid, sig) != true) {
    fmt::print(stderr,
               "faultline: process {} does not catch {}, which would likely kill it; start it "
               "with FAULTLINE_DUMP=1 (or FAULTLINE_DUMP_SIGNAL, or under `faultline run`), or "
               "pass --force\n",
               a.pid, signal_name(sig));
    return kExitFailed;
  }
  std::string dir = a.dir.empty() ? target_report_dir(a.pid) : absolute_dir(a.dir);
  ReportListing before = list_reports(dir);
  if (::kill(a.pid, sig) != 0) {
    fmt::print(stderr, "faultline: cannot signal process {}: {}\n", a.pid, std::strerror(errno));
    return kExitFailed;
  }
  const std::string pid_part = fmt::format("-{}-", a.pid);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.timeout);
  while (std::chrono::steady_clock::now() < deadline) {
    ReportListing now = list_reports(dir);
    for (const std::string& name : new_reports(before, now)) {
      if (name.find(pid_part) == std::string::npos) continue;
      std::string path = (fs::path(dir) / name).string();
      std::optional<report::Report> r;
      try {
        r = report::load_report(path);
      } catch (const std::exception&) {
        continue;  // not complete yet: look again next round
      }
      before[name] = now[name];
      if (r->process.pid != a.pid) continue;
      if (r->kind != "dump") {
        fmt::print(stderr, "faultline: process {} wrote a \"{}\" report instead: {}\n", a.pid,
                   report::escape_controls(r->kind), report::escape_controls(path));
        return kExitFailed;
      }
      if (a.print_path) return print_out(path + "\n") ? kExitOk : kExitFailed;
      fmt::print(stderr, "faultline: dump report {}\n", path);
      std::string text = a.faulthandler
                             ? report::render_faulthandler(*r)
                             : report::render_text(*r, report::TextOptions{want_color(a.color)});
      return print_out(text) ? kExitOk : kExitFailed;
    }
    if (::kill(a.pid, 0) != 0 && errno == ESRCH) {
      fmt::print(stderr, "faultline: process {} exited before writing a dump report\n", a.pid);
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fmt::print(stderr, "faultline: no dump report from process {} in {} after {} s\n", a.pid, dir,
             a.timeout);
  return kExitFailed;
}

}  // namespace

void add_run_command(CLI::App& app, int& status) {
  auto run = std::make_shared<RunArgs>();
  CLI::App* r = app.add_subcommand(
      "run",
      "Run a command with libfaultline.so preloaded; exits as the command did and prints where "
      "new reports are");
  r->footer("Usage: faultline run [OPTIONS] [--] COMMAND [ARGS...]");
  // Everything from the command on is the command's: `faultline run python3
  // x.py -d data` passes -d to x.py, whether or not "--" came first.
  r->positionals_at_end();
  r->add_option("-d,--dir", run->dir,
                "report directory (FAULTLINE_DIR; default: current directory)");
  r->add_option("--signals", run->signals,
                "fatal signals to handle, e.g. SEGV,BUS,ABRT (FAULTLINE_SIGNALS)");
  r->add_flag("--no-stderr", run->no_stderr,
              "no summary on stderr at a crash (FAULTLINE_STDERR=0)");
  r->add_option("--max-frames", run->max_frames,
                "native frames kept per thread (FAULTLINE_MAX_FRAMES)")
      ->check(CLI::Range(1, 10000));
  r->add_option("--watchdog", run->watchdog,
                "seconds the crash handler may run before it is cut short, 0: never "
                "(FAULTLINE_WATCHDOG)")
      ->check(CLI::Range(0, 3600));
  r->add_option("--dump-signal", run->dump_signal,
                "signal that makes the process write a live dump report (FAULTLINE_DUMP_SIGNAL)")
      ->capture_default_str();
  r->add_flag("--no-dump", run->no_dump, "do not install the dump signal handler");
  r->add_option(
       "--timeout", run->timeout,
       "write a dump report if the command still runs after SECONDS (FAULTLINE_DUMP_AFTER)")
      ->check(CLI::PositiveNumber);
  r->add_flag("--timeout-exit", run->timeout_exit,
              "after the timeout dump, end the process (FAULTLINE_DUMP_AFTER_EXIT=1)");
  r->add_option("-e,--env", run->env,
                "set another variable for the command: NAME=VALUE (repeatable)")
      ->allow_extra_args(false);
  r->add_option("--lib", run->lib,
                "the libfaultline.so to preload (default: found beside faultline)");
  r->add_flag("-q,--quiet", run->quiet, "do not print where reports are");
  r->add_option("--upload", run->upload,
                "after the command ends, send its new reports to Sentry at this DSN, each with its "
                "minidump (FAULTLINE_MINIDUMP=1 unless set; see "
                "`faultline upload`)");
  r->add_option("COMMAND", run->command, "the command and its arguments (after --)")->required();
  r->callback([run, &status] {
    const std::string dump_text = report::escape_controls(run->dump_signal);
    const std::string signals_text = report::escape_controls(run->signals);
    int dump = run->no_dump ? 0 : parse_signal(run->dump_signal);
    if (!run->no_dump && dump == 0) {
      fmt::print(stderr, "faultline: unknown signal \"{}\"\n", dump_text);
      status = kExitUsage;
      return;
    }
    if (std::string why = bad_signal_list(run->signals); !run->signals.empty() && !why.empty()) {
      fmt::print(stderr, "faultline: --signals {}: {}\n", signals_text, why);
      status = kExitUsage;
      return;
    }
    if (dump >= faultline::core::kRtSignalMax) {
      fmt::print(stderr,
                 "faultline: --dump-signal {}: signal 64 (SIGRTMAX) cannot be used: the library "
                 "takes signals 1 to 63\n",
                 dump_text);
      status = kExitUsage;
      return;
    }
    // What the library would refuse at start (and fall back to its default
    // set for): a handled signal that is also the thread signal or the dump
    // signal.
    int thread = faultline::core::kRtSignalMax - 3;
    if (const char* t = std::getenv("FAULTLINE_THREAD_SIGNAL"); t && *t) thread = parse_signal(t);
    if (std::string clash = signal_list_clash(run->signals, thread, dump); !clash.empty()) {
      fmt::print(stderr, "faultline: --signals {}: {}\n", signals_text, clash);
      status = kExitUsage;
      return;
    }
    std::string why;
    if (!run->upload.empty() && !upload::parse_dsn(run->upload, &why)) {
      fmt::print(stderr, "faultline: bad DSN: {}\n", why);
      status = kExitUsage;
      return;
    }
    status = run_command(*run);
  });

  auto dump = std::make_shared<DumpArgs>();
  CLI::App* d = app.add_subcommand(
      "dump",
      "Ask a running process (started under `faultline run`) for a live report of all its "
      "threads, wait for it and show it");
  d->add_option("PID", dump->pid, "process id")
      ->required()
      ->check(CLI::Validator(
          [](std::string& v) {
            bool digits =
                !v.empty() && v.size() < 10 &&
                std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
            return digits && std::atoi(v.c_str()) > 0 ? std::string()
                                                      : "PID must be a process id (1 or more)";
          },
          "PID", "pid"));
  d->add_option("-s,--signal", dump->signal, "the dump signal the process listens to")
      ->capture_default_str();
  d->add_option("-t,--timeout", dump->timeout, "seconds to wait for the report")
      ->check(CLI::Validator(
          [](std::string& v) {
            char* end = nullptr;
            double t = std::strtod(v.c_str(), &end);
            bool ok =
                end && *end == '\0' && end != v.c_str() && std::isfinite(t) && t > 0 && t <= 86400;
            return ok ? std::string() : "seconds, more than 0 (at most a day)";
          },
          "SECONDS", "seconds"))
      ->capture_default_str();
  d->add_option("-d,--dir", dump->dir,
                "where the process writes reports (default: its FAULTLINE_DIR, else its working "
                "directory)");
  d->add_flag("--force", dump->force,
              "signal even when libfaultline.so is not seen in the process");
  d->add_flag("--faulthandler", dump->faulthandler, "show in CPython faulthandler's layout");
  d->add_option("--color", dump->color, "auto, always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  d->add_flag("--print-path", dump->print_path, "print only the new report's path");
  d->callback([dump, &status] { status = dump_process(*dump); });
}

}  // namespace faultline::cli
