// faultline run -- CMD...: runs a command with libfaultline.so preloaded.
#include "cli/cmd_run.h"

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
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "cli/cmd_upload.h"
#include "cli/report_input.h"
#include "cli/report_listing.h"
#include "cli/signal_args.h"
#include "cli/upload.h"
#include "core/base/rt_signal.h"
#include "report/render.h"

extern char** environ;

namespace faultline::cli {

namespace fs = std::filesystem;

namespace {

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
}

}  // namespace faultline::cli
