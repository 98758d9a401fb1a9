// A minidump of the crash, in the format Breakpad and Crashpad write on
// Linux, so that the native crash tools (lldb, minidump_stackwalk, Sentry's
// minidump processing) read faultline's crashes.
//
// Streams: system info, the thread list (each thread's registers and a
// bounded window of its stack from the stack pointer up), a memory list of
// those windows, the module list with each build-id as a CodeView record, the
// exception (signal, si_code, address), and the Linux streams Breakpad writes
// (/proc/self/status, the command line, auxv, /proc/self/maps,
// /etc/lsb-release).
//
// Async-signal-safe: no heap (a static output buffer), no locks, every read of
// foreign memory through the SafeReader, every /proc file bounded.
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/base/arch.h"
#include "core/capture.h"
#include "core/modules/modules.h"

namespace faultline::core {

struct MinidumpThread {
  pid_t tid;
  const ArchThreadRegs* regs;  // its registers (minidump_arch.h); nullptr: unknown
  // The stack window as copied when the registers were taken (see
  // minidump_read_stack); nullptr: read it from the stack pointer now.
  const char* stack;
  uint64_t stack_start;
  size_t stack_len;
};

struct MinidumpInput {
  int signo;  // 0: not a crash (a live dump): no exception stream
  int code;   // si_code
  uintptr_t address;
  pid_t crashed_tid;
  const MinidumpThread* threads;
  int nthreads;
  const ModuleTable* modules;
  const char* cmdline;  // NUL-separated arguments, as the report carries them
  int cmdline_len;
  size_t stack_bytes;  // stack window per thread (at most kMinidumpMaxStack)
};

constexpr size_t kMinidumpMaxStack = 64 * 1024;
constexpr size_t kMinidumpDefaultStack = 32 * 1024;

struct MinidumpResult {
  uint64_t bytes;  // file size
  int err;         // errno of the failure, 0 on success
};

// Copies the stack window of a thread whose stack pointer is sp into dst
// (window bytes at most): from just below sp (the red zone) upwards, the
// whole window when it is readable, else page by page up to the first page
// that is not. Returns the bytes copied; *start receives their address.
size_t minidump_read_stack(char* dst, uint64_t sp, size_t window, uint64_t* start);

// Writes the minidump to fd (a new, empty, seekable file). Returns false on a
// write error (result->err says which).
bool write_minidump(int fd, const MinidumpInput& in, MinidumpResult* result);

}  // namespace faultline::core
