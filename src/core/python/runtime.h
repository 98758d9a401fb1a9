// Finding the CPython runtime (_PyRuntime) and the layout that describes it,
// without calling into Python and without dlsym: the symbol is looked up in
// the dynamic/static symbol tables of the main executable (Debian's static
// python3.11) and of loaded libpython3.X.so modules (pyenv's shared builds,
// embedding programs), with pread(2) only.
#pragma once

#include <stdint.h>

#include "core/frames.h"
#include "core/modules/modules.h"
#include "core/python/layouts.h"
#include "core/python/walker.h"

namespace faultline::core::python {

struct Runtime {
  bool found;
  uintptr_t address;      // _PyRuntime
  uintptr_t module_base;  // of the module that defines it
  PyLayout layout;
  uint32_t hexversion;  // 0 when only the minor version is known
  char version[24];
  // Type objects, for checking what a pointer points to (0 if not found).
  uintptr_t code_type;
  uintptr_t bytes_type;
  uintptr_t unicode_type;
};

// Async-signal-safe (open/pread/close and the SafeReader). Fills *rt from the
// first module that defines _PyRuntime. Returns nullptr on success, else why
// not (a static string); "no runtime" is reported as kNoRuntime.
const char* locate_runtime(const ModuleTable& modules, Runtime* rt);

// The same from addresses the loader already bound (install time): no
// module table, no symbol lookup.
const char* runtime_from_exports(const PythonExports& e, Runtime* rt);

extern const char kNoRuntime[];

// Install time: the offset of the kernel tid inside glibc's struct pthread
// (what pthread_t points to), found by scanning our own thread's struct for
// gettid(). -1 if not found. 3.9/3.10 record only pthread_t per thread.
long find_pthread_tid_offset();

}  // namespace faultline::core::python
