// faultline dump PID: a live report of all threads of a running process,
// captured from outside by ptrace, or asked of faultline's dump handler in it
// by a signal.
#include "cli/cmd_dump.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "cli/dump_signal_thread.h"
#include "cli/proc_status.h"
#include "cli/ptrace_dump.h"
#include "cli/ptrace_stop.h"
#include "cli/report_input.h"
#include "cli/report_listing.h"
#include "cli/signal_args.h"
#include "report/render.h"

namespace faultline::cli {

namespace fs = std::filesystem;

namespace {

struct DumpArgs {
  int pid = 0;
  std::string signal = "SIGUSR2";
  double timeout = 10;
  std::string dir;
  bool force = false;
  bool faulthandler = false;
  std::string color = "auto";
  bool print_path = false;
  std::string method = "auto";
  int asked_by = 0;  // --asked-by: the thread of pid that asked (the library's helper)
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

// What /proc/PID/maps says of faultline in process `pid`.
struct MapsView {
  int error = 0;  // errno when the file could not be read (0: read)
  bool library = false;
  std::set<int> dump_signals;  // marks "/memfd:faultline dump signal N"
};

MapsView read_maps(int pid) {
  MapsView v;
  std::string path = fmt::format("/proc/{}/maps", pid);
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (!f) {
    v.error = errno;
    return v;
  }
  static const std::string kMark = "/memfd:faultline dump signal ";
  char buf[4096];
  std::string line;
  while (std::fgets(buf, sizeof buf, f)) {
    line = buf;
    if (line.find("libfaultline") != std::string::npos) v.library = true;
    size_t at = line.find(kMark);
    if (at != std::string::npos) v.dump_signals.insert(std::atoi(line.c_str() + at + kMark.size()));
  }
  // Another user's process: the open may succeed and the read fail.
  if (std::ferror(f)) v.error = errno ? errno : EIO;
  std::fclose(f);
  return v;
}

// Whether process `pid` has a handler for `sig` (SigCgt of /proc/PID/status);
// nullopt when that cannot be read. A loaded libfaultline.so is not enough:
// preloaded without FAULTLINE_DUMP it leaves SIGUSR2 to its default action,
// which ends the process.
std::optional<bool> catches_signal(int pid, int sig) {
  std::optional<unsigned long long> caught =
      status_mask(fmt::format("/proc/{}/status", pid), "SigCgt");
  if (!caught) return std::nullopt;
  return has_signal(*caught, sig);
}

// Shows (or names) the dump report at path.
// sig: the dump signal sent to ask for it, 0 for none.
int show_report(const DumpArgs& a, const std::string& path, const report::Report& r, int sig = 0) {
  if (a.print_path) return print_out(path + "\n") ? kExitOk : kExitFailed;
  fmt::print(stderr, "faultline: dump report {}\n", path);
  report::TextOptions options{want_color(a.color), sig ? signal_name(sig) : std::string()};
  std::string text =
      a.faulthandler ? report::render_faulthandler(r) : report::render_text(r, options);
  return print_out(text) ? kExitOk : kExitFailed;
}

// The threads of process pid asleep in the kernel now ("S" in their stat):
// those a signal may make fail with EINTR, as "TID (NAME)".
std::vector<std::string> sleeping_threads(int pid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(fmt::format("/proc/{}/task", pid), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::ifstream in(it->path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size())
      continue;
    if (stat[close + 2] == 'S')
      out.push_back(fmt::format("{} ({})", it->path().filename().string(),
                                report::escape_controls(stat.substr(open + 1, close - open - 1))));
  }
  return out;
}

// Writes the report under dir as the library names reports (the CLI's pid
// stands for the thread: no thread of the process wrote it), through a
// temporary file that no one else can have planted. Returns the path, or ""
// with *err set.
std::string write_dump_report(const std::string& dir, int pid, const nlohmann::json& j,
                              std::string* err) {
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = static_cast<uint64_t>(::getpid()) << 20;
  time_t now = ::time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  std::string name =
      fmt::format("faultline-{}-{}-{}-{}-{:016x}.json", stamp, host, pid, ::getpid(), rnd);
  std::string tmp = (fs::path(dir) / fmt::format(".faultline-{:016x}.tmp", rnd)).string();
  std::string path = (fs::path(dir) / name).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = fmt::format("cannot create {}: {}", tmp, std::strerror(errno));
    return "";
  }
  std::string text = j.dump(1) + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  // link(2), not rename: never replaces a file already there.
  if (!ok || ::link(tmp.c_str(), path.c_str()) != 0) {
    *err = fmt::format("cannot write {}: {}", path, std::strerror(errno));
    ::unlink(tmp.c_str());
    return "";
  }
  ::unlink(tmp.c_str());
  return path;
}

int signal_dump(const DumpArgs& a, int sig);

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
  if (a.method == "signal") return signal_dump(a, sig);
  // Where ptrace is allowed: no signal, no library needed, nothing in the
  // process sees a thing (interrupted system calls are restarted).
  ThreadStopper::install_exit_handlers();
  // Found before the capture: the process may be gone after it.
  std::string dir = a.dir.empty() ? target_report_dir(a.pid) : absolute_dir(a.dir);
  nlohmann::json j;
  std::string why;
  // --timeout bounds the wait for a thread that does not stop with the others.
  int err = ptrace_capture(a.pid, &j, &why, static_cast<int>(a.timeout * 1000));
  if (err == 0 && a.asked_by > 0) j["dumping_tid"] = a.asked_by;
  if (err == 0) {
    std::string werr;
    std::string path = write_dump_report(dir, a.pid, j, &werr);
    if (path.empty()) {
      fmt::print(stderr, "faultline: {}\n", werr);
      return kExitFailed;
    }
    try {
      return show_report(a, path, report::load_report(path));
    } catch (const std::exception& e) {
      fmt::print(stderr, "faultline: {}: {}\n", path, report::escape_controls(e.what()));
      return kExitFailed;
    }
  }
  if (err == ESRCH) {
    fmt::print(stderr, "faultline: process {} exited before it could be dumped\n", a.pid);
    return kExitFailed;
  }
  if (a.method == "ptrace") {
    fmt::print(stderr, "faultline: cannot dump process {} by ptrace: {}\n", a.pid, why);
    return kExitFailed;
  }
  std::vector<std::string> sleeping = sleeping_threads(a.pid);
  std::string list;
  for (const std::string& t : sleeping) list += (list.empty() ? "" : ", ") + t;
  fmt::print(stderr,
             "faultline: ptrace refused ({}); asking process {} for a dump by {} instead "
             "(its handler has the library's helper take it by ptrace where it can; else its "
             "threads waiting in the kernel may see a system call fail with EINTR{})\n",
             why, a.pid, signal_name(sig),
             list.empty() ? std::string() : fmt::format(" (now waiting: {})", list));
  return signal_dump(a, sig);
}

// Today's request: faultline's dump handler in the process writes the report.
int signal_dump(const DumpArgs& a, int sig) {
  // Without faultline's handler most signals (SIGUSR2 included) terminate the
  // process, and a program's own handler may shut it down: never send one
  // that faultline did not install. The library publishes a mark while its
  // handler of the dump signal is installed.
  MapsView maps = read_maps(a.pid);
  if (!a.force && maps.error) {
    fmt::print(stderr,
               "faultline: cannot read /proc/{}/maps: {}; permission to look into process {} "
               "was refused (another user's process, or ptrace access restricted), so whether "
               "faultline handles {} there cannot be told. Run `faultline dump` as the job's "
               "user or as root; --force signals it without looking\n",
               a.pid, std::strerror(maps.error), a.pid, signal_name(sig));
    return kExitFailed;
  }
  if (!a.force && !maps.library) {
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
  if (!a.force && !maps.dump_signals.count(sig)) {
    std::string where;
    for (int other : maps.dump_signals) where += fmt::format(" {}", signal_name(other));
    fmt::print(stderr,
               "faultline: process {} handles {}, but not with faultline's dump handler (its "
               "own program's handler may shut it down){}; start it with FAULTLINE_DUMP=1 (or "
               "FAULTLINE_DUMP_SIGNAL, or under `faultline run`), or pass --force\n",
               a.pid, signal_name(sig),
               where.empty() ? std::string()
                             : fmt::format("; faultline's dump signal there is{} (-s)", where));
    return kExitFailed;
  }
  std::string dir = a.dir.empty() ? target_report_dir(a.pid) : absolute_dir(a.dir);
  ReportListing before = list_reports(dir);
  if (int err = send_dump_signal(a.pid, sig); err != 0) {
    fmt::print(stderr, "faultline: cannot signal process {}: {}\n", a.pid, std::strerror(err));
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
      return show_report(a, path, *r, sig);
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

void add_dump_command(CLI::App& app, int& status) {
  auto dump = std::make_shared<DumpArgs>();
  CLI::App* d = app.add_subcommand(
      "dump",
      "A live report of all threads of a running process, captured by ptrace (the process "
      "needs no library and notices nothing), or asked by signal of faultline's dump handler "
      "in it; show it");
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
  d->add_option("-t,--timeout", dump->timeout,
                "seconds to wait for the report (ptrace: for a thread that does not stop at once)")
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
  d->add_option("-m,--method", dump->method,
                "ptrace: capture from outside (no signal, no library needed); signal: ask "
                "faultline's dump handler in the process; auto: ptrace, else signal")
      ->check(CLI::IsMember({"auto", "ptrace", "signal"}))
      ->capture_default_str();
  // Used by the library's faultline_dump_now() (src/install/dump_helper.cpp).
  d->add_option("--asked-by", dump->asked_by,
                "the thread of PID that asked for the dump (the report's dumping_tid)")
      ->check(CLI::PositiveNumber);
  d->callback([dump, &status] {
    if (dump->asked_by > 0 &&
        !fs::exists(fmt::format("/proc/{}/task/{}", dump->pid, dump->asked_by))) {
      fmt::print(stderr, "faultline: thread {} is not one of process {}\n", dump->asked_by,
                 dump->pid);
      status = kExitUsage;
      return;
    }
    status = dump_process(*dump);
  });
}

}  // namespace faultline::cli
