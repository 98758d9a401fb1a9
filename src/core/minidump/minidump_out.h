// Writing a minidump: sequential output through one static buffer, the
// stream directory, strings (MDString) and whole files as streams.
// Async-signal-safe (write, open, read; no heap).
#pragma once

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/minidump/minidump.h"
#include "core/minidump/minidump_format.h"

namespace faultline::core::md {

// Sequential output through one static buffer (the crash path has one writer
// at a time: the owner of the crash). `pos` is the file offset of buf[0].
constexpr size_t kBufSize = 128 * 1024;
extern char g_buf[kBufSize];  // minidump_out.cpp
// A thread's stack window is reserved in g_buf in one piece (put_stack).
static_assert(kMinidumpMaxStack <= kBufSize, "the stack window fits the output buffer");
static_assert(kMinidumpDefaultStack <= kMinidumpMaxStack, "the default window is within the cap");

struct Out {
  int fd;
  uint64_t pos;  // file offset of g_buf[0]
  size_t len;    // bytes in g_buf
  int err;

  uint32_t rva() const { return static_cast<uint32_t>(pos + len); }
  void flush() {
    size_t done = 0;
    while (done < len && !err) {
      ssize_t n = write(fd, g_buf + done, len - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) err = n < 0 ? errno : EIO;
      if (n > 0) done += static_cast<size_t>(n);
    }
    pos += len;
    len = 0;
  }
  // Room for n contiguous bytes at g_buf + len (n <= kBufSize).
  char* reserve(size_t n) {
    if (len + n > kBufSize) flush();
    return g_buf + len;
  }
  void put(const void* p, size_t n) {
    const char* s = static_cast<const char*>(p);
    while (n > 0) {
      if (len == kBufSize) flush();
      size_t k = kBufSize - len < n ? kBufSize - len : n;
      memcpy(g_buf + len, s, k);
      len += k;
      s += k;
      n -= k;
    }
  }
  void align8() {
    static const char zeros[8] = {};
    uint64_t at = pos + len;
    if (at % 8) put(zeros, 8 - at % 8);
  }
};

struct Streams {
  DirectoryEntry entries[kMaxStreams];
  int count;
  void add(uint32_t type, uint32_t rva, uint32_t size) {
    if (count < kMaxStreams) entries[count++] = DirectoryEntry{type, Location{size, rva}};
  }
};

// Writes s (n bytes of UTF-8; bad bytes become U+FFFD) as an MDString: a
// 32-bit byte length, UTF-16LE code units and a terminating 0. Returns its RVA.
uint32_t put_string(Out& o, const char* s, size_t n);

// Copies a file (at most `cap` bytes) into a stream of its own. Missing
// files are left out.
void put_file(Out& o, Streams& st, uint32_t type, const char* path, size_t cap);

}  // namespace faultline::core::md
