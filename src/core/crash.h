// The crash path's state: everything prepared at install and everything
// captured at crash time. One global instance (g_crash), set up by src/install/install.cpp
// in normal context and used by the handler.
#pragma once

#include <signal.h>
#include <stdint.h>

#include "core/annotations.h"
#include "core/arena.h"
#include "core/capture.h"
#include "core/fd_identity.h"
#include "core/modules.h"
#include "core/python.h"

struct faultline_callback_writer;

namespace faultline::core {

// Prepared at install, read-only in the handler.
struct Config {
  char dir[4096]{};  // absolute report directory (for messages)
  int dir_fd{};      // O_DIRECTORY fd, -1 if it could not be opened
  int dir_errno{};   // why not
  bool write_stderr{};
  uint64_t signals{};  // bit per signal
  int max_frames{};
  int max_threads{};        // threads with full native stacks
  int thread_signal{};      // real-time signal that asks a thread for its stack
  int thread_timeout_ms{};  // how long to wait for all threads' answers
  int dump_signal{};        // live-dump signal, 0: none
  bool exit_after_dump{};   // the timed dump ends the process (faulthandler's exit=True)
  void (*callback)(faultline_callback_writer*, void*){};
  void* callback_data{};
  int watchdog_seconds{};
  size_t arena_bytes{};
  // Process facts gathered at install.
  char argv[8192]{};  // NUL-separated
  int argv_len{};
  int64_t start_sec{}, start_nsec{};
};

constexpr int kMaxThreads = 512;
constexpr int kMaxPhases = 16;
constexpr int kMaxModules = 2048;

// Filled at crash time.
struct Capture {
  const char* kind;  // "crash"
  int signo;
  siginfo_t info;
  ucontext_t uc;
  bool have_uc;
  pid_t pid, tid;
  int64_t time_sec, time_nsec;
  uint64_t start_ns;  // monotonic at handler entry
  ModuleTable modules;
  ThreadCapture* threads;
  int nthreads;
  int threads_total;         // threads the process had
  int threads_cut;           // listed without stacks because of the cap
  uint64_t threads_park_ns;  // how long the other threads took to answer
  bool watchdog_noted;
  PythonCapture python;
  CaptureErrors errors;
  // What the application recorded.
  AnnotationView* annotations;
  int nannotations;
  AnnotationView* thread_annotations;  // the crashing thread's
  int nthread_annotations;
  BreadcrumbView* breadcrumbs;
  int nbreadcrumbs;
  AnnotationView* callback_items;  // what the user callback added
  int ncallback_items;
  // How long each capture phase took.
  struct PhaseTime {
    const char* name;  // "modules: ..." (the part before ':' is the phase)
    uint64_t ns;
  } phases[kMaxPhases];
  int nphases;
  // Diagnosis (computed after capture).
  char summary[512];
  const char* category;
  char signature[17];
};

struct CrashState {
  Config config{};
  Arena arena{};
  Capture* capture{};  // in the arena
  struct sigaction previous[65]{};
  bool handled[65]{};
  bool installed{};
  pid_t pid{};               // our pid, updated in fork children
  int reserved_fd{-1};       // closed at crash time so a report can be opened
  FdIdentity reserved_id{};  // what reserved_fd is (the program may reuse the number)
  FdIdentity dir_id{};       // what config.dir_fd is
};

// What faultline_callback_writer points to.
struct CallbackWriter {
  static constexpr int kMax = 32;
  Arena* arena;
  AnnotationView* items;
  int count;
};

// Crashes of other threads that arrived while the first one was reported.
struct SecondaryCrash {
  volatile int valid;
  pid_t tid;
  int signo;
  int code;
  uintptr_t pc;
  uintptr_t addr;
};
constexpr int kMaxSecondary = 64;
extern SecondaryCrash g_secondary[kMaxSecondary];
extern volatile int g_nsecondary;

extern CrashState g_crash;

// handler.cpp
void crash_signal_handler(int signo, siginfo_t* info, void* ucontext);
void dump_signal_handler(int signo, siginfo_t* info, void* ucontext);
// Install time: the stack the owner of a crash runs on (see handler.cpp).
bool make_crash_stack();
// True once the watchdog's first stage has passed (handler.cpp).
bool watchdog_fired();
// In a fork child: nobody owns a crash there.
void reset_ownership_after_fork();
int dumps_written();
const char* last_report_path();

// report.cpp: the diagnosis, and the two outputs.
void diagnose(Capture* c);
// The crashed thread's capture (nullptr for a dump), and the Python thread
// running on a native thread (nullptr if none).
const ThreadCapture* crashed_thread(const Capture& c);
const PyThread* python_thread_for(const Capture& c, pid_t tid);
// Writes the JSON report to fd through a buffer from the arena.
bool write_json_report(const Capture& c, const Config& cfg, int fd, int* err);
void write_stderr_summary(const Capture& c, const Config& cfg);

}  // namespace faultline::core
