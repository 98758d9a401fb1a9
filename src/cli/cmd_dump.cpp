// faultline dump PID: asks a running process for a live report of all threads.
#include "cli/cmd_dump.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

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

void add_dump_command(CLI::App& app, int& status) {
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
