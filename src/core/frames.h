// The pieces of a capture: modules, native and Python frames, threads and
// the list of what went wrong. All of it lives in the arena; nothing here
// owns heap memory. The whole capture (struct Capture) is in capture.h.
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucontext.h>

#include "core/base/arch.h"

namespace faultline::core {

struct Origin;  // a frame's layer (diagnosis/classify.h)

struct Module {
  uintptr_t base;  // lowest mapped address (load bias + lowest PT_LOAD vaddr)
  uintptr_t end;   // one past the highest mapped address
  uintptr_t bias;  // l_addr: ELF vaddr + bias = runtime address
  const char* path;
  uint8_t build_id[32];
  uint8_t build_id_len;
  bool is_main;
  bool is_vdso;
  uintptr_t eh_frame_hdr;  // runtime address of .eh_frame_hdr, 0 if none
  // A module the crash-time walk took from the snapshot brings the
  // unwinder's sparse index of its search table (see CfiModule; copied into
  // the arena); null for modules read at crash time.
  // No default member initializers: they would make every global holding a
  // Module (the snapshot's buffers) dynamically initialised, touching
  // megabytes at start-up.
  const int32_t* cfi_index;
  uint32_t cfi_index_len;
  uint32_t cfi_count;
  uintptr_t cfi_table;
};

struct NativeFrame {
  uintptr_t pc;
  uintptr_t sp;
  int module;          // index into Capture::modules, -1 if none
  const char* symbol;  // raw name from .symtab/.dynsym, nullptr if none
  uintptr_t symbol_offset;
  bool signal_frame;     // pc is exact (interrupted, not a return address)
  const Origin* origin;  // classification (set after symbolization)
};

// One Python frame (filled by the Python walker).
struct PyFrame {
  const char* file;
  const char* function;
  const char* qualname;  // nullptr where the version has none
  int line;
  bool entry;            // first frame of a C-level call into the interpreter
  uintptr_t frame_addr;  // interpreter frame address (for interleaving)
  // On an entry frame, an address its eval call keeps on the C stack, inside
  // that _PyEval_EvalFrameDefault's native frame: the shim frame it pushed
  // (3.12+) or its _PyCFrame (3.11); 0 where there is none.
  uintptr_t entry_shim;
};

enum class Unwinder : uint8_t {
  kNone,
  kLibunwind,
  kFramePointer,
  kLibunwindThenFp,
  kCfi,               // the own CFI unwinder, to the end
  kCfiThenLibunwind,  // the CFI unwinder, then libunwind where it stopped
  kCfiThenFp          // the CFI unwinder, then the frame-pointer chain
};

// A thread's registers as its signal context gave them, and the window of
// its stack above the stack pointer, both taken when the thread answered the
// stack request (for the minidump): the context lives in a signal frame that
// is gone once the thread has answered, and the thread runs on (a sleep
// interrupted by the request returns EINTR and its caller moves on).
struct ThreadRegs : ArchThreadRegs {  // the registers (core/base/arch.h)
  char* stack;                        // room for the stack window; nullptr: read it when writing
  size_t stack_cap;                   // its size
  uint64_t stack_start;               // address of the first byte copied
  size_t stack_len;                   // bytes copied
};

struct ThreadCapture {
  pid_t tid;
  char name[32];
  bool crashed;
  bool captured;  // native frames were captured
  Unwinder unwinder;
  int frames_total;  // frames seen (> nframes when truncated)
  int nframes;
  NativeFrame* frames;
  int npy;  // Python frames
  int py_total;
  PyFrame* py;
  bool holds_gil;
  const char* note;  // why not captured, etc.
  char proc_state;   // the state letter from /proc stat, 0 if unknown
  char wchan[48];    // from /proc wchan, for threads that did not answer
  ThreadRegs* regs;  // other threads' registers, when a minidump is written; else nullptr
};

constexpr int kMaxErrors = 32;

struct CaptureErrors {
  const char* items[kMaxErrors];
  int count;
  // The same message (one literal) once: a capture that meets it for many
  // modules or threads would fill the list with copies and push others out.
  void add(const char* e) {
    for (int i = 0; i < count; ++i) {
      if (items[i] == e) return;
    }
    if (count < kMaxErrors) items[count++] = e;
  }
};

// The loaded modules, sorted by base address (modules/modules.h fills it).
struct ModuleTable {
  Module* items;
  int count;
  int capacity;
  bool truncated;
};

// One thread's Python frames (python/walker.h fills them).
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

// What the application recorded (capture/annotations.h copies it at a crash).
struct AnnotationView {
  const char* key;
  const char* value;
};
struct BreadcrumbView {
  int64_t time_sec, time_nsec;
  const char* message;
};
}  // namespace faultline::core
