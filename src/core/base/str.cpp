#include "core/base/str.h"

#include "core/base/start_text.h"

namespace faultline::core {

FAULTLINE_START_TEXT size_t str_len(const char* s) {
  size_t n = 0;
  while (s && s[n]) ++n;
  return n;
}

size_t str_nlen(const char* s, size_t max) {
  size_t n = 0;
  while (s && n < max && s[n]) ++n;
  return n;
}

bool str_eq(const char* a, const char* b) {
  if (!a || !b) return a == b;
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

bool str_starts_with(const char* s, const char* prefix) {
  if (!s || !prefix) return false;
  while (*prefix) {
    if (*s++ != *prefix++) return false;
  }
  return true;
}

const char* str_find(const char* s, size_t n, const char* needle) {
  size_t m = str_len(needle);
  if (m == 0) return s;
  if (!s || m > n) return nullptr;
  for (size_t i = 0; i + m <= n; ++i) {
    size_t j = 0;
    while (j < m && s[i + j] == needle[j]) ++j;
    if (j == m) return s + i;
  }
  return nullptr;
}

FAULTLINE_START_TEXT size_t str_copy_n(char* dst, size_t dst_size, const char* src, size_t n) {
  if (dst_size == 0) return 0;
  size_t i = 0;
  while (src && i < n && i + 1 < dst_size && src[i]) {
    dst[i] = src[i];
    ++i;
  }
  dst[i] = '\0';
  return i;
}

FAULTLINE_START_TEXT size_t str_copy(char* dst, size_t dst_size, const char* src) {
  return str_copy_n(dst, dst_size, src, static_cast<size_t>(-1));
}

const char* path_basename(const char* path) {
  const char* base = path;
  for (const char* p = path; p && *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base;
}

size_t fmt_dec(char* out, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

size_t fmt_sdec(char* out, int64_t v) {
  if (v < 0) {
    out[0] = '-';
    return 1 + fmt_dec(out + 1, static_cast<uint64_t>(-(v + 1)) + 1);
  }
  return fmt_dec(out, static_cast<uint64_t>(v));
}

static const char kHexDigits[] = "0123456789abcdef";

size_t fmt_hex(char* out, uint64_t v) {
  // Digits written from the last, straight into place: a report of 65
  // threads formats ~10,000 of these (a sixth of its write phase went to
  // the old loop through a scratch buffer).
  const size_t n = v ? (67 - static_cast<size_t>(__builtin_clzll(v))) / 4 : 1;
  out[0] = '0';
  out[1] = 'x';
  char* d = out + 2 + n;
  do {
    *--d = kHexDigits[v & 0xf];
    v >>= 4;
  } while (v);
  return n + 2;
}

size_t fmt_hex_bytes(char* out, const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHexDigits[bytes[i] >> 4];
    out[2 * i + 1] = kHexDigits[bytes[i] & 0xf];
  }
  return 2 * n;
}

bool parse_int(const char* s, int64_t* out) {
  if (!s || !*s) return false;
  bool neg = false;
  if (*s == '-') {
    neg = true;
    ++s;
  }
  if (!*s) return false;
  int64_t v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
    if (v > (INT64_MAX - (*s - '0')) / 10) return false;
    v = v * 10 + (*s - '0');
  }
  *out = neg ? -v : v;
  return true;
}

StrBuf& StrBuf::add_n(const char* s, size_t n) {
  for (size_t i = 0; s && i < n && s[i]; ++i) {
    if (len_ + 1 >= cap_) {
      truncated_ = true;
      break;
    }
    buf_[len_++] = s[i];
  }
  if (cap_) buf_[len_] = '\0';
  return *this;
}

StrBuf& StrBuf::add(const char* s) {
  return add_n(s, static_cast<size_t>(-1));
}

StrBuf& StrBuf::add_char(char c) {
  char s[2] = {c, '\0'};
  return add_n(s, 1);
}

StrBuf& StrBuf::add_dec(int64_t v) {
  char tmp[24];
  size_t n = fmt_sdec(tmp, v);
  return add_n(tmp, n);
}

StrBuf& StrBuf::add_hex(uint64_t v) {
  char tmp[24];
  size_t n = fmt_hex(tmp, v);
  return add_n(tmp, n);
}

}  // namespace faultline::core
