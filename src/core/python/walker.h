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

namespace faultline::core {

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
