// Drives the C++ API for the API tests:
//   api_driver annotate16    16 threads serve requests with scoped request ids; one crashes
//   api_driver terminate-runtime | terminate-custom | terminate-int
//   api_driver reinstall     install, uninstall (a crash is not reported), install, crash
//   api_driver uninstalled   install, uninstall, crash: no report
//   api_driver dump-serving  dump_now() from a thread while 8 others serve; then exit 0
//   api_driver callback      the user callback adds to the report; then crash
//   api_driver install-twice a second install (bigger arena) keeps the arena and fds; dump, crash
//   api_driver fork-key      a thread-scoped key set, then fork: the child crashes with it
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <faultline/faultline.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

volatile int* volatile g_null = nullptr;
std::atomic<bool> g_stop{false};
std::atomic<long> g_served{0};

struct CustomError {
  int code;
};

__attribute__((noinline)) void crash_in_request(int id) {
  *g_null = id;
}

__attribute__((noinline)) void serve(int worker, int request, int poisoned) {
  std::string id = "req-" + std::to_string(worker) + "-" + std::to_string(request);
  faultline::ScopedAnnotation scope("request_id", id.c_str());
  if (worker == 11 && request == poisoned) crash_in_request(request);
  g_served.fetch_add(1);
}

__attribute__((noinline)) void throw_it(const char* kind) {
  if (!strcmp(kind, "runtime")) throw std::runtime_error("bad tensor shape [3, 224]");
  if (!strcmp(kind, "custom")) throw CustomError{7};
  throw 42;
}

// A user callback that never returns in time (it spins for 6 s).
void slow_callback(faultline_callback_writer* w, void*) {
  faultline_callback_add(w, "slow", "started");
  timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec - start.tv_sec < 6);
}

void callback(faultline_callback_writer* w, void* data) {
  faultline_callback_add(w, "queue_depth", static_cast<const char*>(data));
  faultline_callback_add(w, "phase", "serving");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  faultline::Options opts;
  if (mode == "callback") {
    static char depth[] = "17";
    opts.callback = callback;
    opts.callback_data = depth;
  }
  if (mode == "slow-callback-worker") opts.callback = slow_callback;
  if (faultline::install(opts) != 0) return 3;
  faultline::annotate("model", "resnet50");
  faultline::annotate("build", faultline::version());

  if (mode == "annotate16") {
    std::vector<std::thread> threads;
    static std::atomic<int> started{0};
    for (int w = 0; w < 16; ++w) {
      threads.emplace_back([w] {
        // Every worker exists before any serves: the crash must find all 16.
        started.fetch_add(1);
        while (started.load() < 16) std::this_thread::yield();
        for (int r = 0;; ++r) {
          serve(w, r, 500);
          if (g_stop) return;
        }
      });
    }
    for (auto& t : threads) t.join();
  } else if (mode == "fork-key") {
    faultline::ScopedAnnotation req("request_id", "req-before-fork");
    pid_t child = fork();
    if (child == 0) {
      // The forking thread lives on under the child's id; its key stays.
      faultline::ScopedAnnotation phase("phase", "child");
      crash_in_request(2);
    }
    return child > 0 ? 0 : 6;
  } else if (mode.rfind("terminate-", 0) == 0) {
    throw_it(mode.c_str() + 10);
  } else if (mode == "reinstall") {
    faultline::uninstall();
    if (faultline::installed()) return 4;
    if (faultline::install(opts) != 0) return 5;
    crash_in_request(1);
  } else if (mode == "install-twice") {
    // A second install asking for a bigger arena (faultline.enable() after
    // the preload, a library calling the C API again) must leave the arena
    // mapped where it is: a crash or dump on another thread may be in it.
    auto arenas = [] {
      std::vector<std::string> out;
      FILE* f = std::fopen("/proc/self/maps", "r");
      char line[512];
      unsigned long lo, hi;
      while (f && std::fgets(line, sizeof line, f)) {
        if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2 && hi - lo == (16ul << 20)) {
          out.push_back(std::to_string(lo));
        }
      }
      if (f) std::fclose(f);
      return out;
    };
    auto fds = [] {
      std::string out;
      for (int fd = 0; fd < 1024; ++fd) {
        char link[64], target[512];
        std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) out += std::to_string(fd) + "=" + std::string(target, n) + "\n";
      }
      return out;
    };
    // A hole at 0: a descriptor closed and opened again would land there.
    close(0);
    std::vector<std::string> before = arenas();
    std::string fds_before = fds();
    faultline_options bigger;
    faultline_options_init(&bigger);
    bigger.arena_bytes = 64u << 20;
    if (faultline_install(&bigger) != 0) return 5;
    std::vector<std::string> after = arenas();
    // The report directory's descriptor (the same directory) stays too.
    if (fds() != fds_before) {
      std::printf("descriptors before:\n%s", fds_before.c_str());
      std::printf("descriptors after:\n%s", fds().c_str());
      return 8;
    }
    for (const auto& a : before) {
      bool kept = false;
      for (const auto& b : after) kept = kept || a == b;
      if (!kept) return 6;
    }
    std::printf("arenas kept: %zu\n", before.size());
    std::fflush(stdout);
    if (faultline::dump_now() != 0) return 7;
    crash_in_request(4);
  } else if (mode == "uninstalled") {
    faultline::uninstall();
    crash_in_request(2);
  } else if (mode == "dump-serving") {
    std::vector<std::thread> threads;
    for (int w = 0; w < 8; ++w) {
      threads.emplace_back([w] {
        std::string id = "worker-" + std::to_string(w);
        faultline::ScopedAnnotation scope("worker", id.c_str());
        while (!g_stop) {
          g_served.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int dumps = 0;
    for (int i = 0; i < 5; ++i) dumps += faultline::dump_now() == 0;
    long before = g_served.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g_stop = true;
    for (auto& t : threads) t.join();
    std::printf("dumps=%d served_after=%ld last=%s\n", dumps, g_served.load() - before,
                faultline::last_report().c_str());
    return dumps == 5 ? 0 : 6;
  } else if (mode == "slow-callback-worker") {
    // A worker crashes; the capture hangs in the callback; the watchdog's
    // first stage (an alarm that may land on the main thread) must reach
    // the owner, which abandons the callback and writes the report.
    std::thread worker([] { crash_in_request(9); });
    worker.join();
  } else if (mode == "callback") {
    crash_in_request(3);
  }
  return 1;
}
