// Raw system calls the crash path uses everywhere: the thread and process
// ids (straight from the kernel: glibc's caches are wrong in a vfork child)
// and the monotonic clock. Async-signal-safe.
#pragma once

#include <stddef.h>
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

// Calls f(name) for each entry of the directory open at dir, read with
// getdents64 (no libc directory stream, no heap), until f returns true.
template <typename F>
void for_each_dir_entry(int dir, F f) {
  struct Dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[1];
  };
  alignas(8) char buf[4096];  // read as Dirent64 records
  for (;;) {
    long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) return;
    for (long off = 0; off < n;) {
      const Dirent64* d = reinterpret_cast<const Dirent64*>(buf + off);
      if (d->d_reclen == 0) break;
      off += d->d_reclen;
      if (f(d->d_name)) return;
    }
  }
}

// Names an anonymous mapping: /proc/PID/maps shows it as [anon:NAME], so
// tools that scan a process's memory know it (redis's memory test, run from
// its crash handler, skips mappings whose line says "stack"). Linux 5.17
// with CONFIG_ANON_VMA_NAME; elsewhere EINVAL: false. Install time: the
// kernel splits the mapping, nothing is touched.
inline bool name_mapping(const void* p, size_t len, const char* name) {
  constexpr long kSetVma = 0x53564d41;  // PR_SET_VMA; older headers lack it
  constexpr long kSetVmaAnonName = 0;   // PR_SET_VMA_ANON_NAME
  return syscall(SYS_prctl, kSetVma, kSetVmaAnonName, p, len, name) == 0;
}

// CLOCK_MONOTONIC in nanoseconds.
inline uint64_t monotonic_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace faultline::core
