// SafeReader: reads memory the crash path does not own without faulting.
//
// The heap, the interpreter's structures and other threads' stacks may be
// corrupt when we run. Every read of memory that is not our own goes through
// safe_read(), which returns false instead of raising SIGSEGV.
//
// Primary method: process_vm_readv(2) on our own pid. Fallback, when seccomp
// or a kernel without CONFIG_CROSS_MEMORY_ATTACH denies it: write(2) from the
// address into a pipe (the kernel returns EFAULT for a bad address), then
// read it back. The pipe is made by the first read that needs it. All plain
// syscalls: async-signal-safe.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

namespace faultline::core {

enum class SafeReadMethod : int { kVmReadv = 0, kPipe = 1, kNone = 2 };

// Makes the pipe now rather than at the first pipe read (tests; a process
// that expects to run out of descriptors). Idempotent, async-signal-safe.
void safe_read_init();
// Crash time: stops using the pipe if the program closed or reused its
// descriptors. Async-signal-safe.
void safe_read_check_fds();
// Crash time, at the start of a capture: a pipe that could not be made in
// an earlier one (out of descriptors) is tried again. Async-signal-safe.
void safe_read_new_capture();
// After a jump out of a capture phase (a fault, the watchdog): a pipe read
// this thread was in is abandoned, its leftovers drained and the pipe let
// go. Async-signal-safe.
void safe_read_end_reads();
// In a fork child: drops the parent's pipe (its first pipe read makes its
// own). Install-time context.
void safe_read_reset_after_fork();
// Forces a method, for tests of the fallback. Install-time only.
void safe_read_force(SafeReadMethod m);
SafeReadMethod safe_read_method();
const char* safe_read_method_name();

// Crash time: the process id the reads use during a capture (0: ask the
// kernel on every read, as outside a capture). Saves one system call per
// read; a capture pins its own pid, so a forked child never reads its
// parent. Async-signal-safe.
void safe_read_pin_pid(pid_t pid);

// Out of process only (`faultline dump` by ptrace), never on the crash
// path: every read reads process pid with process_vm_readv and fails where
// that fails. It never falls back to the pipe, which can only read the
// reader's own memory (at the target's addresses: the wrong bytes).
void safe_read_remote(pid_t pid);
// The process safe_read_remote points the reads at; 0 in the process itself.
pid_t safe_read_remote_pid();

// Copies n bytes from addr into dst. True only if all n bytes were read.
// Async-signal-safe. Concurrent callers are safe (the pipe path serialises
// through a spin flag and falls back to failure instead of waiting forever).
bool safe_read(void* dst, uintptr_t addr, size_t n);

template <typename T>
inline bool safe_read_obj(T* dst, uintptr_t addr) {
  return safe_read(dst, addr, sizeof(T));
}

// Many reads at once: dst[i] <- n[i] bytes at addr[i]; ok[i] says whether
// each was read whole. One process_vm_readv for all where the SafeReader
// uses it (a failing range costs one more call), else one read each.
// Async-signal-safe.
void safe_read_many(void* const* dst, const uintptr_t* addr, const size_t* n, bool* ok, int count);

// Reads a NUL-terminated string of at most cap-1 bytes into dst (always
// terminated). Returns the length read, or -1 if nothing could be read.
long safe_read_cstr(char* dst, size_t cap, uintptr_t addr);

}  // namespace faultline::core
