// A fuzzer's input as a file: the ELF readers want a file descriptor or a
// path (/proc/self/fd/N), and an anonymous memory file costs no disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

// A memory file holding data (as much as could be written); -1 on failure.
inline int memfd_with(const uint8_t* data, size_t size) {
  int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return fd;
}
