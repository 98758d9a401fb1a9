// The CPython walker's interface to the rest of the crash path.
//
// capture_python() finds the interpreter runtime (_PyRuntime) in the process
// without calling into Python and without dlsym, walks every interpreter and
// thread state through the SafeReader, and records each thread's Python
// frames, innermost first. It is async-signal-safe: no heap, no locks, every
// foreign pointer read through safe_read(), every loop bounded.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "core/base/arena.h"
#include "core/frames.h"
#include "core/modules/modules.h"

namespace faultline::core {

struct PyThread {
  pid_t native_tid;    // 0 if unknown
  uint64_t thread_id;  // PyThreadState.thread_id (pthread_t)
  bool holds_gil;
  int nframes;        // frames kept
  int frames_total;   // frames seen
  PyFrame* frames;    // innermost first
  const char* error;  // why the walk of this thread ended early, or nullptr
};

struct PythonCapture {
  bool present;      // a CPython runtime was found
  char version[24];  // "3.11.7"
  uint32_t hexversion;
  uintptr_t runtime;      // address of _PyRuntime
  bool found_at_install;  // the install's answer was used (no symbol lookup at crash time)
  int nthreads;
  int threads_total;
  PyThread* threads;
};

// One entry of a thread's merged stack: a native frame or a Python frame.
struct FrameRef {
  bool python;
  int index;  // into ThreadCapture::frames or PyThread::frames
};

// Merges a thread's native and Python frames in call order, innermost first:
// each native frame of the interpreter's eval loop is preceded by the Python
// frames it was running. Returns the number of entries written to out (at
// most cap), or -1 when the merge cannot be proven (then the report keeps
// both lists and says they were not merged).
int interleave_frames(const ThreadCapture& native, const PyThread& py, const ModuleTable& modules,
                      FrameRef* out, int cap);

// CPython's exported symbols as the loader bound them, and the module that
// defines _PyRuntime (install time: no symbol table is read).
struct PythonExports {
  const char* path;       // the module's path (its name gives 3.9/3.10's version)
  uintptr_t module_base;  // its lowest mapped address (Module::base)
  uintptr_t runtime;      // _PyRuntime
  uintptr_t py_version;   // Py_Version (3.11+), else 0
  uintptr_t code_type, bytes_type, unicode_type;
};
// Install-time: remembers the runtime those addresses describe (its
// layout), so a crash need not look for it. Safe to call more than once.
void python_init_exports(const PythonExports& e);

// Crash time. max_frames bounds each thread's frames; max_threads the threads.
void capture_python(const ModuleTable& modules, Arena* arena, PythonCapture* out, int max_threads,
                    int max_frames, CaptureErrors* errors);

}  // namespace faultline::core
