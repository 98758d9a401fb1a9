// The capture: everything the crash owner gathers about the process before
// anything is written. capture_all fills it phase by phase (phase.h), in the
// arena; the report writer, the stderr summary and the torchelastic error
// file only read it.
#pragma once

#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

#include "core/frames.h"
#include "core/phase.h"
#include "core/terminate_record.h"

namespace faultline::core {

constexpr int kMaxThreads = 512;
constexpr int kMaxPhases = 16;
constexpr int kMaxModules = 2048;

// What the report is about (the report's "kind").
enum class CaptureKind : uint8_t {
  kCrash,      // a fatal signal
  kTerminate,  // abort() from our std::terminate handler: an uncaught C++ exception
  kDump,       // a live dump: the process goes on
  kShutdown,   // SIGTERM (signal/shutdown.h), reported before it takes its course
  kException,  // an uncaught Python exception, taken as a live dump (terminate_record.h)
};
// "crash", "terminate", "dump", "shutdown", "exception"
const char* capture_kind_name(CaptureKind k);
// A report of a process that goes on afterwards: no minidump, no hold.
inline bool capture_is_live(CaptureKind k) {
  return k == CaptureKind::kDump || k == CaptureKind::kException;
}

// A crash of another thread that arrived while the first one was reported
// (signal/handler.cpp records it; the report lists it).
struct SecondaryCrash {
  volatile int valid;
  pid_t tid;
  int signo;
  int code;
  uintptr_t pc;
  uintptr_t addr;
};
constexpr int kMaxSecondary = 64;

// Filled at crash time.
struct Capture {
  CaptureKind kind;
  int signo;
  siginfo_t info;
  ucontext_t uc;
  bool have_uc;
  // Set: no other thread is asked for its stack, and this says why (each
  // one's note). The process goes on (a shutdown the program's own handler
  // takes over, an uncaught Python exception), and asking would interrupt
  // the other threads' system calls with EINTR. They are listed without
  // native frames; their Python stacks are still read (from memory).
  const char* own_thread_only;
  pid_t pid, tid;
  int64_t time_sec, time_nsec;
  uint64_t start_ns;  // monotonic at the claim of the crash or dump (handler.cpp)
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
    Phase phase;
    uint64_t ns;
  } phases[kMaxPhases];
  int nphases;
  // The module table came from the snapshot made outside the handler (it
  // was current), not from a walk of the link map at crash time.
  bool modules_from_snapshot;
  bool modules_tail_walked;  // and the modules loaded since read from the link map
  // The minidump beside the report (minidump_file.h): its file name in the
  // report directory ("" when none was written) and size.
  char minidump_file[160];
  uint64_t minidump_bytes;
  // The signal as delivered when a handler raised it again over the
  // original fault (reraise.h); signo, info and uc's registers then describe
  // the original fault.
  struct Reraised {
    bool present;
    int signo;
    siginfo_t info;
    // Index of the signal trampoline in the crashed thread's native frames;
    // -1: none, the handler had returned and the re-raise came at the fault.
    int frame;
    // The original siginfo was rebuilt from the context's trap number, error
    // code and cr2: the handler was no SA_SIGINFO one, so the kernel's frame
    // held none.
    bool from_context;
  } reraised;
  // What the std::terminate handler recorded, for a report of kind
  // kTerminate (nullptr otherwise): the exception's type and what().
  const TerminateInfo* terminate;
  // What the package handed over, for a report of kind kException.
  const PythonExceptionInfo* py_exception;
  // The crashes of other threads meanwhile: a table the signal handler
  // keeps filling while this capture is written (valid entries only).
  const SecondaryCrash* secondary;
  const volatile int* nsecondary;
  // Diagnosis (computed after capture).
  char summary[512];
  const char* category;
  char signature[17];
  // Crashes of this signature not reported before this one
  // (write/crash_limits.h): how many, and the time of the first.
  uint64_t suppressed_count;
  int64_t suppressed_since;
};

}  // namespace faultline::core
