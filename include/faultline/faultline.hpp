// faultline for C++ programs: a small C++17 API over the C API in
// faultline.h. Header-only, so it adds nothing to the library's ABI.
//
//   #include <faultline/faultline.hpp>
//
//   int main() {
//     faultline::Options opts;               // defaults + FAULTLINE_* variables
//     opts.report_dir = "/var/crash/server";
//     opts.callback = [](faultline_callback_writer* w, void*) {
//       faultline_callback_add(w, "queue_depth", g_depth_text);  // signal-safe only!
//     };
//     faultline::install(opts);
//     faultline::annotate("model", "resnet50");      // process-wide crash key
//     ...
//     void serve(const Request& r) {
//       faultline::ScopedAnnotation req("request_id", r.id.c_str());  // this thread only
//       ...                                         // a crash here names r.id
//     }
//     faultline::dump_now();                        // "dump" report, process goes on
//   }
//
// Crash keys never allocate and are safe from any thread at any rate; the
// callback runs inside the signal handler and must be async-signal-safe.
#pragma once

#include <faultline/faultline.h>

#include <string>

namespace faultline {

// Every FAULTLINE_* setting as a field. Constructed with the defaults and the
// environment applied, like faultline_options_init().
struct Options {
  std::string report_dir;             // "" : FAULTLINE_DIR or the current directory
  unsigned long long signals;         // bit (1ull << signo) per fatal signal
  bool write_stderr;                  // faulthandler-style summary on stderr
  int max_frames;                     // native frames per thread
  int watchdog_seconds;               // bound on the handler; 0: none
  size_t arena_bytes;                 // crash-time memory
  int max_threads;                    // threads with full stacks
  int thread_signal;                  // asks each thread for its stack
  int thread_timeout_ms;              // wait for all threads' answers
  int dump_signal;                    // live-dump signal; 0: none
  int dump_after_seconds;             // timed dump; 0: never
  bool exit_after_dump;               // the timed dump ends the process
  bool thread_altstacks;              // alternate signal stack on every thread
  bool stay_in_front;                 // keep faultline first when others install handlers
  faultline_crash_callback callback;  // async-signal-safe; may add to the report
  void* callback_data;

  Options() {
    faultline_options o;
    faultline_options_init(&o);
    report_dir = o.report_dir ? o.report_dir : "";
    signals = o.signals;
    write_stderr = o.write_stderr != 0;
    max_frames = o.max_frames;
    watchdog_seconds = o.watchdog_seconds;
    arena_bytes = o.arena_bytes;
    max_threads = o.max_threads;
    thread_signal = o.thread_signal;
    thread_timeout_ms = o.thread_timeout_ms;
    dump_signal = o.dump_signal;
    dump_after_seconds = o.dump_after_seconds;
    exit_after_dump = o.exit_after_dump != 0;
    thread_altstacks = o.thread_altstacks != 0;
    stay_in_front = o.stay_in_front != 0;
    callback = o.callback;
    callback_data = o.callback_data;
  }
};

// Installs the handlers. Returns 0 or a negative errno value; the program is
// never stopped by a failed install.
inline int install(const Options& options = Options()) {
  faultline_options o;
  faultline_options_init(&o);
  o.report_dir = options.report_dir.empty() ? nullptr : options.report_dir.c_str();
  o.signals = options.signals;
  o.write_stderr = options.write_stderr ? 1 : 0;
  o.max_frames = options.max_frames;
  o.watchdog_seconds = options.watchdog_seconds;
  o.arena_bytes = options.arena_bytes;
  o.max_threads = options.max_threads;
  o.thread_signal = options.thread_signal;
  o.thread_timeout_ms = options.thread_timeout_ms;
  o.dump_signal = options.dump_signal;
  o.dump_after_seconds = options.dump_after_seconds;
  o.exit_after_dump = options.exit_after_dump ? 1 : 0;
  o.thread_altstacks = options.thread_altstacks ? 1 : 0;
  o.stay_in_front = options.stay_in_front ? 1 : 0;
  o.callback = options.callback;
  o.callback_data = options.callback_data;
  return faultline_install(&o);
}

inline void uninstall() {
  faultline_uninstall();
}
inline bool installed() {
  return faultline_installed() != 0;
}

// A report of kind "dump" of the live process; 0 or a negative errno value.
inline int dump_now() {
  return faultline_dump_now();
}

// The path of the last report this process wrote, or "".
inline std::string last_report() {
  char buf[4200];
  return faultline_last_report(buf, sizeof buf) ? std::string(buf) : std::string();
}

// Process-wide crash key; value nullptr removes it. Never allocates.
inline int annotate(const char* key, const char* value) {
  return faultline_annotate(key, value);
}

inline void breadcrumb(const char* message) {
  faultline_breadcrumb(message);
}

// A thread-scoped crash key for as long as the object lives (e.g. the
// request a worker is serving). Removed when it goes out of scope.
class ScopedAnnotation {
 public:
  ScopedAnnotation(const char* key, const char* value) {
    size_t i = 0;
    for (; key && key[i] && i + 1 < sizeof key_; ++i) key_[i] = key[i];
    key_[i] = '\0';
    faultline_thread_annotate(key_, value);
  }
  ~ScopedAnnotation() { faultline_thread_annotate(key_, nullptr); }
  ScopedAnnotation(const ScopedAnnotation&) = delete;
  ScopedAnnotation& operator=(const ScopedAnnotation&) = delete;

 private:
  char key_[64];  // a copy: the caller's key need not outlive the guard
};

inline const char* version() {
  return faultline_version();
}

}  // namespace faultline
