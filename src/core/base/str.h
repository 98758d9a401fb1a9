// Signal-safe string and number helpers for the crash path.
//
// Everything here is async-signal-safe: no allocation, no locale, no libc
// formatting. These exist so that nobody on the crash path reaches for printf.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace faultline::core {

size_t str_len(const char* s);
size_t str_nlen(const char* s, size_t max);
bool str_eq(const char* a, const char* b);
bool str_starts_with(const char* s, const char* prefix);
// Finds `needle` in the first `n` bytes of `s`; nullptr if absent.
const char* str_find(const char* s, size_t n, const char* needle);
// Copies at most dst_size-1 bytes and always terminates; returns bytes copied.
size_t str_copy(char* dst, size_t dst_size, const char* src);
size_t str_copy_n(char* dst, size_t dst_size, const char* src, size_t n);
// The part of `path` after the last '/'.
const char* path_basename(const char* path);

// Number formatting into caller buffers. Each returns the number of chars
// written (no terminator unless stated). 24 bytes hold any 64-bit number.
size_t fmt_dec(char* out, uint64_t v);
size_t fmt_sdec(char* out, int64_t v);
size_t fmt_hex(char* out, uint64_t v);  // "0x" prefix, lowercase, no padding
size_t fmt_hex_bytes(char* out, const uint8_t* bytes, size_t n);  // no prefix
// Parses a decimal number; false on anything but digits (and a leading '-').
bool parse_int(const char* s, int64_t* out);

// A fixed-capacity string builder over a caller buffer; always terminated,
// silently truncates.
class StrBuf {
 public:
  StrBuf(char* buf, size_t cap) : buf_(buf), cap_(cap), len_(0) {
    if (cap_) buf_[0] = '\0';
  }
  StrBuf& add(const char* s);
  StrBuf& add_n(const char* s, size_t n);
  StrBuf& add_char(char c);
  StrBuf& add_dec(int64_t v);
  StrBuf& add_hex(uint64_t v);
  const char* c_str() const { return buf_; }
  size_t len() const { return len_; }
  bool truncated() const { return truncated_; }

 private:
  char* buf_;
  size_t cap_;
  size_t len_;
  bool truncated_ = false;
};

}  // namespace faultline::core
