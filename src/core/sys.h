// Raw system calls the crash path uses everywhere: the thread and process
// ids (straight from the kernel: glibc's caches are wrong in a vfork child)
// and the monotonic clock. Async-signal-safe.
#pragma once

#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

namespace faultline::core {

inline pid_t sys_gettid() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

inline pid_t sys_getpid() {
  return static_cast<pid_t>(syscall(SYS_getpid));
}

// CLOCK_MONOTONIC in nanoseconds.
inline uint64_t monotonic_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace faultline::core
