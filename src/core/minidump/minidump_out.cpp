#include "core/minidump/minidump_out.h"

#include <fcntl.h>

namespace faultline::core::md {

char g_buf[kBufSize];

uint32_t put_string(Out& o, const char* s, size_t n) {
  o.align8();
  uint32_t rva = o.rva();
  // Count the code units first (UTF-8 decoded; bad bytes become U+FFFD).
  uint32_t units = 0;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      uint32_t bytes = units * 2;
      o.put(&bytes, 4);
    }
    size_t i = 0;
    while (i < n) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      uint32_t cp = 0xfffd;
      size_t k = 1;
      if (c < 0x80) {
        cp = c;
      } else if ((c & 0xe0) == 0xc0 || (c & 0xf0) == 0xe0 || (c & 0xf8) == 0xf0) {
        size_t need = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
        uint32_t v = c & (need == 2 ? 0x1f : need == 3 ? 0x0f : 0x07);
        size_t j = 1;
        for (; j < need && i + j < n; ++j) {
          unsigned char d = static_cast<unsigned char>(s[i + j]);
          if ((d & 0xc0) != 0x80) break;
          v = (v << 6) | (d & 0x3f);
        }
        if (j == need && v <= 0x10ffff) {
          cp = v;
          k = need;
        }
      }
      i += k;
      if (cp >= 0x10000) {
        if (pass == 0) {
          units += 2;
        } else {
          uint16_t pair[2] = {static_cast<uint16_t>(0xd800 + ((cp - 0x10000) >> 10)),
                              static_cast<uint16_t>(0xdc00 + ((cp - 0x10000) & 0x3ff))};
          o.put(pair, 4);
        }
      } else if (pass == 0) {
        ++units;
      } else {
        uint16_t u = static_cast<uint16_t>(cp);
        o.put(&u, 2);
      }
    }
  }
  uint16_t zero = 0;
  o.put(&zero, 2);
  return rva;
}

void put_file(Out& o, Streams& st, uint32_t type, const char* path, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  o.align8();
  uint32_t rva = o.rva();
  size_t total = 0;
  while (total < cap) {
    size_t want = cap - total < 4096 ? cap - total : 4096;
    char* dst = o.reserve(want);
    ssize_t n = read(fd, dst, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    o.len += static_cast<size_t>(n);
    total += static_cast<size_t>(n);
  }
  close(fd);
  st.add(type, rva, static_cast<uint32_t>(total));
}

}  // namespace faultline::core::md
