// faultline upload REPORT... --dsn DSN: sends reports to Sentry.
// faultline watch DIR --dsn DSN: sends reports as they appear in DIR.
#include "cli/cmd_upload.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "cli/report_input.h"
#include "cli/upload.h"

namespace faultline::cli {

namespace fs = std::filesystem;

namespace {

struct UploadArgs {
  std::vector<std::string> reports;
  std::string dsn;
  upload::Options options;
};

struct WatchArgs {
  std::string dir;
  std::string dsn;
  double retry_interval = 60;
  upload::Options options;
};

// A final report name: faultline-*.json (the writer's temporary names start with a dot).
bool is_report_name(const std::string& name) {
  return name.rfind("faultline-", 0) == 0 && name.size() > 5 &&
         name.compare(name.size() - 5, 5, ".json") == 0;
}

void add_common_options(CLI::App* sub, std::string& dsn, upload::Options& o) {
  sub->add_option("--dsn", dsn, "the Sentry DSN (https://KEY@HOST/PROJECT; default: SENTRY_DSN)")
      ->envname("SENTRY_DSN")
      ->required();
  sub->add_option("--spool", o.spool,
                  "where unsent envelopes and sent markers are kept (default: "
                  ".faultline-spool in the report's directory)");
  sub->add_option("--retries", o.retries, "attempts after the first, on errors that may pass")
      ->check(CLI::Range(0, 20))
      ->capture_default_str();
  sub->add_option("--backoff", o.backoff, "seconds before the first retry (doubled each time)")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  sub->add_option("--timeout", o.timeout, "seconds per attempt")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  sub->add_flag("-q,--quiet", o.quiet, "print only errors");
}

bool resolve_dsn(const std::string& text, upload::Options& o) {
  std::string why;
  auto d = upload::parse_dsn(text, &why);
  if (!d) {
    fmt::print(stderr, "faultline: bad DSN: {}\n", why);
    return false;
  }
  o.dsn = *d;
  return true;
}

int upload_reports(UploadArgs& a) {
  if (!resolve_dsn(a.dsn, a.options)) return kExitUsage;
  int status = kExitOk;
  std::set<std::string> flushed;
  for (const std::string& path : a.reports) {
    std::string spool = upload::spool_for(a.options, path);
    // What an earlier run could not send goes first.
    if (flushed.insert(spool).second && upload::flush_spool(a.options, spool) > 0) {
      status = kExitFailed;
    }
    upload::Outcome out = upload::upload_report(a.options, path);
    if (out == upload::Outcome::kSpooled || out == upload::Outcome::kRejected ||
        out == upload::Outcome::kBadInput) {
      status = kExitFailed;
    }
  }
  return status;
}

volatile sig_atomic_t g_stop = 0;
void on_stop(int) {
  g_stop = 1;
}

// Uploads every report in `dir` that has not been sent (the spool's markers say which).
void upload_directory(const WatchArgs& a, const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (is_report_name(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) upload::upload_report(a.options, dir + "/" + name);
}

int watch_directory(WatchArgs& a) {
  if (!resolve_dsn(a.dsn, a.options)) return kExitUsage;
  std::error_code ec;
  if (!fs::is_directory(a.dir, ec)) {
    fmt::print(stderr, "faultline: {} is not a directory\n", a.dir);
    return kExitFailed;
  }
  std::string dir = fs::absolute(a.dir, ec).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0 || inotify_add_watch(fd, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    fmt::print(stderr, "faultline: cannot watch {}: {}\n", dir, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return kExitFailed;
  }
  struct sigaction sa = {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  if (!a.options.quiet) fmt::print(stderr, "faultline: watching {}\n", dir);
  // The watch is set before the first listing, so no report falls in between.
  std::string spool = upload::spool_for(a.options, dir + "/x.json");
  upload::flush_spool(a.options, spool);
  upload_directory(a, dir);
  auto next_flush = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(a.retry_interval));
  alignas(struct inotify_event) char buf[8192];
  while (!g_stop) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, 500);
    if (r < 0 && errno != EINTR) {
      fmt::print(stderr, "faultline: poll: {}\n", std::strerror(errno));
      break;
    }
    if (r > 0) {
      std::set<std::string> seen;
      for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        for (char* q = buf; q < buf + n;) {
          auto* ev = reinterpret_cast<struct inotify_event*>(q);
          if (ev->mask & IN_Q_OVERFLOW) seen.insert("");  // events lost: list the directory
          if (ev->len && is_report_name(ev->name)) seen.insert(ev->name);
          q += sizeof(struct inotify_event) + ev->len;
        }
      }
      if (seen.count("")) {
        upload_directory(a, dir);
      } else {
        for (const std::string& name : seen) upload::upload_report(a.options, dir + "/" + name);
      }
    }
    if (std::chrono::steady_clock::now() >= next_flush) {
      upload::flush_spool(a.options, spool);
      next_flush = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(a.retry_interval));
    }
  }
  ::close(fd);
  return kExitOk;
}

}  // namespace

int upload_after_run(const std::string& dsn, const std::vector<std::string>& reports) {
  UploadArgs a;
  a.dsn = dsn;
  a.reports = reports;
  return upload_reports(a);
}

void add_upload_commands(CLI::App& app, int& status) {
  auto up = std::make_shared<UploadArgs>();
  CLI::App* u = app.add_subcommand(
      "upload",
      "Send reports to Sentry: one envelope each, with the minidump and the JSON report "
      "attached; retried, spooled when the server cannot be reached, never sent twice");
  u->add_option("REPORT", up->reports, "faultline reports (JSON files)")->required();
  add_common_options(u, up->dsn, up->options);
  u->callback([up, &status] { status = upload_reports(*up); });

  auto w = std::make_shared<WatchArgs>();
  CLI::App* wa = app.add_subcommand(
      "watch",
      "Send every report that appears in DIR to Sentry (inotify), and what was not sent "
      "before; runs until SIGTERM");
  wa->add_option("DIR", w->dir, "the report directory")->required();
  add_common_options(wa, w->dsn, w->options);
  wa->add_option("--retry-interval", w->retry_interval,
                 "seconds between attempts to send what is spooled")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  wa->callback([w, &status] { status = watch_directory(*w); });
}

}  // namespace faultline::cli
