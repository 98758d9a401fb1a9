// faultline for C++ programs: a small C++17 API over the C API in
// faultline.h. Header-only, so it adds nothing to the library's ABI.
//
//   #include <faultline/faultline.hpp>
//
//   int main() {
//     faultline::Options opts;               // the C struct: defaults + FAULTLINE_*
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

// The C options (faultline_options, every field by its C name), initialised
// like faultline_options_init(): the defaults, then the FAULTLINE_* variables.
// `report_dir` is the C field: the string must live until install() returns.
struct Options : faultline_options {
  Options() : faultline_options() { faultline_options_init(static_cast<faultline_options*>(this)); }
};
static_assert(sizeof(Options) == sizeof(faultline_options), "Options is the C struct");

// Installs the handlers. Returns 0 or a negative errno value; the program is
// never stopped by a failed install.
inline int install(const Options& options = Options()) {
  return faultline_install(&options);
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
  char key_[FAULTLINE_KEY_MAX + 1];  // a copy: the caller's key need not outlive the guard
};

inline const char* version() {
  return faultline_version();
}

}  // namespace faultline
