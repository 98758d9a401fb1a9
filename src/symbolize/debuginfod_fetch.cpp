#include "symbolize/debuginfod_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <thread>

#ifdef FAULTLINE_HAVE_DEBUGINFOD
#include <elfutils/debuginfod.h>
#endif

#include "symbolize/elf_file.h"

namespace faultline::symbolize::internal {

struct Debuginfod::Shared {
  struct Answer {
    std::string path, why;
  };
  std::mutex mutex;
  std::condition_variable done;
  std::map<std::string, Answer> answers;
  int running = 0;
  std::atomic<bool> cancel{false};
};

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double miss_seconds() {
  const char* v = getenv("FAULTLINE_DEBUGINFOD_MISS_S");
  char* end = nullptr;
  double s = v && *v ? strtod(v, &end) : 600;
  return (v && *v && (*end != '\0' || s < 0)) ? 600 : s;
}

// One marker per build-id and server list: another server may answer.
std::string marker_path(const std::string& build_id) {
  std::string dir = miss_cache_dir();
  if (dir.empty()) return dir;
  const char* urls = getenv("DEBUGINFOD_URLS");
  char key[32];
  snprintf(key, sizeof key, "%016zx", std::hash<std::string>()(urls ? urls : ""));
  return dir + "/" + build_id + "-" + key;
}

// The reason a recent run got no answer for `build_id`, or "".
std::string cached_miss(const std::string& build_id) {
  std::string path = marker_path(build_id);
  struct stat st;
  if (path.empty() || lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != geteuid())
    return "";
  double age = difftime(time(nullptr), st.st_mtime);
  if (age < 0 || age > miss_seconds()) return "";
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n)) + " (remembered from a run " +
         std::to_string(static_cast<long>(age)) + " s ago; FAULTLINE_DEBUGINFOD_MISS_S)";
}

// Unused in a build without libdebuginfod (nothing is fetched there).
[[maybe_unused]] void remember_miss(const std::string& build_id, const std::string& why) {
  std::string path = marker_path(build_id);
  if (path.empty() || miss_seconds() <= 0) return;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t ignored = write(fd, why.data(), why.size());
  (void)ignored;
  close(fd);
}

#ifdef FAULTLINE_HAVE_DEBUGINFOD
int progress(debuginfod_client* client, long, long) {
  auto* shared = static_cast<Debuginfod::Shared*>(debuginfod_get_user_data(client));
  return shared->cancel.load() ? 1 : 0;  // non-zero ends the transfer
}

void fetch_one(std::shared_ptr<Debuginfod::Shared> shared, std::string build_id) {
  Debuginfod::Shared::Answer answer;
  std::string bytes;
  debuginfod_client* client = nullptr;
  if (!hex_to_bytes(build_id, &bytes)) {
    answer.why = "debuginfod: not a build-id: " + build_id;
  } else if ((client = debuginfod_begin()) == nullptr) {
    answer.why = "debuginfod: no client";
  } else {
    debuginfod_set_user_data(client, shared.get());
    debuginfod_set_progressfn(client, progress);
    char* path = nullptr;
    int fd = debuginfod_find_debuginfo(client, reinterpret_cast<const unsigned char*>(bytes.data()),
                                       static_cast<int>(bytes.size()), &path);
    debuginfod_end(client);
    if (fd >= 0) {
      answer.path = path ? path : "";
      close(fd);  // reopened through the cache path, so the usual checks apply
    } else if (fd == -ENOENT) {
      answer.why = "debuginfod: no debug info for build-id " + build_id;
    } else {
      answer.why = std::string("debuginfod: ") + std::strerror(-fd);
    }
    free(path);
  }
  std::lock_guard<std::mutex> lock(shared->mutex);
  shared->answers.emplace(build_id, std::move(answer));
  --shared->running;
  shared->done.notify_all();
}
#endif

}  // namespace

std::string miss_cache_dir() {
  std::string base;
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  if (xdg && xdg[0] == '/') {
    base = xdg;
  } else if (home && home[0] == '/') {
    base = std::string(home) + "/.cache";
  } else {
    return "";
  }
  std::string dir = base + "/faultline";
  mkdir(base.c_str(), 0700);
  mkdir(dir.c_str(), 0700);
  dir += "/debuginfod-misses";
  mkdir(dir.c_str(), 0700);
  struct stat st;
  // Only a real directory of ours: never one another user's link points to.
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return "";
  return dir;
}

Debuginfod::Debuginfod(double budget_s)
    : shared_(std::make_shared<Shared>()), budget_s_(budget_s) {}

Debuginfod::~Debuginfod() {
  shared_->cancel = true;
}

bool Debuginfod::pending() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->running > 0;
}

bool Debuginfod::result(const std::string& build_id, std::string* path, std::string* why) {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  auto it = shared_->answers.find(build_id);
  if (it == shared_->answers.end()) return false;
  *path = it->second.path;
  *why = it->second.why;
  return true;
}

void Debuginfod::fetch(const std::vector<std::string>& build_ids) {
  if (!started_) {
    started_ = true;
    deadline_ = now_s() + budget_s_;
  }
  std::vector<std::string> asked;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    for (const std::string& id : build_ids) {
      if (shared_->answers.count(id) || std::find(asked.begin(), asked.end(), id) != asked.end())
        continue;
      std::string miss = cached_miss(id);
      if (!miss.empty()) {
        shared_->answers[id] = {"", miss};
      } else if (budget_s_ <= 0 || now_s() >= deadline_) {
        shared_->answers[id] = {"", "debuginfod: not asked, the network budget of " +
                                        std::to_string(static_cast<int>(budget_s_)) +
                                        " s is spent (--network-budget)"};
      } else {
        asked.push_back(id);
      }
    }
  }
#ifdef FAULTLINE_HAVE_DEBUGINFOD
  for (const std::string& id : asked) {
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      ++shared_->running;
    }
    std::thread(fetch_one, shared_, id).detach();
  }
  std::unique_lock<std::mutex> lock(shared_->mutex);
  auto answered = [&] {
    for (const std::string& id : asked)
      if (!shared_->answers.count(id)) return false;
    return true;
  };
  auto until = std::chrono::steady_clock::now() +
               std::chrono::duration<double>(std::max(0.0, deadline_ - now_s()));
  shared_->done.wait_until(lock, until, answered);
  std::vector<std::pair<std::string, std::string>> misses;
  bool cut_off = false;
  for (const std::string& id : asked) {
    auto it = shared_->answers.find(id);
    if (it == shared_->answers.end()) {
      cut_off = true;
      std::string why = "debuginfod: no answer within the network budget of " +
                        std::to_string(static_cast<int>(budget_s_)) + " s (--network-budget)";
      shared_->answers[id] = {"", why};
      misses.emplace_back(id, why);
    } else if (it->second.path.empty() &&
               it->second.why.find("no debug info") == std::string::npos) {
      misses.emplace_back(id, it->second.why);
    }
  }
  // What is still running is cut off at its next progress call; the run
  // does not wait for it.
  if (cut_off) shared_->cancel = true;
  lock.unlock();
  for (const auto& [id, why] : misses) remember_miss(id, why);
#else
  std::lock_guard<std::mutex> lock(shared_->mutex);
  for (const std::string& id : asked)
    shared_->answers[id] = {"",
                            "DEBUGINFOD_URLS is set but faultline was built without libdebuginfod"};
#endif
}

}  // namespace faultline::symbolize::internal
