// Our descriptors are the program's too: it may close them (daemons close
// every fd) and reuse the numbers for its own files. Before faultline uses or
// closes a descriptor it kept since install, it checks that the number still
// names the same open file. Async-signal-safe (fstat).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace faultline::core {

struct FdIdentity {
  dev_t dev;
  ino_t ino;
  bool valid;
};

// fstat as glibc makes it (fstatat(fd, "", AT_EMPTY_PATH): the same system
// call, so a seccomp filter that lets the program's fstat through lets this
// one through), with our own "": the kernel's read of libc's was a fault on
// a page of libc's at every start-up (~10 us on a VM). True on success.
inline bool fd_stat(int fd, struct stat* st) {
  static constexpr char kEmpty[] = "";
  return fd >= 0 && syscall(SYS_newfstatat, fd, kEmpty, st, AT_EMPTY_PATH) == 0;
}

inline FdIdentity fd_identity(int fd) {
  struct stat st;
  if (!fd_stat(fd, &st)) return FdIdentity{0, 0, false};
  return FdIdentity{st.st_dev, st.st_ino, true};
}

// True if fd is still the file it was when `id` was taken.
inline bool fd_still(int fd, const FdIdentity& id) {
  FdIdentity now = fd_identity(fd);
  return id.valid && now.valid && now.dev == id.dev && now.ino == id.ino;
}

}  // namespace faultline::core
