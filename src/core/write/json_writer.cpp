#include "core/write/json_writer.h"

#include <errno.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/fd_identity.h"
#include "core/base/str.h"

namespace faultline::core {

FdSink::FdSink(int fd, char* buf, size_t cap) : fd_(fd), buf_(buf), cap_(cap) {
  struct stat st;
  // Only a file known to be regular skips the poll: one fstat cannot tell
  // (seccomp) is treated as a pipe, which may block.
  is_pipe_ = fd >= 0 && !(fd_stat(fd, &st) && S_ISREG(st.st_mode));
}

void FdSink::put_slow(const char* s, size_t n) {
  while (n > 0) {
    if (len_ == cap_ && !flush()) {
      len_ = 0;  // keep counting even when writes fail
    }
    size_t room = cap_ - len_;
    size_t take = n < room ? n : room;
    for (size_t i = 0; i < take; ++i) buf_[len_ + i] = s[i];
    len_ += take;
    s += take;
    n -= take;
  }
}

bool FdSink::flush() {
  if (failed_ || fd_ < 0) {  // given up on (a stuck pipe): no second wait per flush
    len_ = 0;
    return !failed_;
  }
  size_t off = 0;
  while (off < len_) {
    if (fd_ < 0) break;
    // Bounded: a pipe nobody reads (stderr of a dead log collector) must
    // not hold the crash handler. Regular files are always ready: no poll,
    // which would cost a system call per 16 KiB of report.
    if (is_pipe_) {
      struct pollfd p = {fd_, POLLOUT, 0};
      int ready = poll(&p, 1, 1000);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        failed_ = true;
        errno_ = ETIMEDOUT;
        break;
      }
    }
    // Ready means room for PIPE_BUF bytes in a pipe; regular files take it all.
    size_t chunk = len_ - off;
    if (chunk > 4096 && is_pipe_) chunk = 4096;
    ssize_t w = write(fd_, buf_ + off, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      failed_ = true;
      errno_ = errno;
      break;
    }
    if (w == 0) {
      failed_ = true;
      errno_ = ENOSPC;
      break;
    }
    off += static_cast<size_t>(w);
  }
  len_ = 0;
  return !failed_;
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (depth_ > 0 && depth_ <= kMaxDepth) {
    if (need_comma_[depth_ - 1]) sink_->put(',');
    need_comma_[depth_ - 1] = true;
  }
}

char* JsonWriter::reserve_value(size_t n) {
  // One more for the comma. A full buffer is flushed first, as put() would.
  if (!sink_->reserve(n + 1)) {
    sink_->flush();
    if (!sink_->reserve(n + 1)) return nullptr;
  }
  before_value();
  return sink_->reserve(n);
}

void JsonWriter::begin_object() {
  before_value();
  sink_->put('{');
  if (depth_ < kMaxDepth) need_comma_[depth_] = false;
  ++depth_;
}

void JsonWriter::end_object() {
  sink_->put('}');
  if (depth_ > 0) --depth_;
}

void JsonWriter::begin_array() {
  before_value();
  sink_->put('[');
  if (depth_ < kMaxDepth) need_comma_[depth_] = false;
  ++depth_;
}

void JsonWriter::end_array() {
  sink_->put(']');
  if (depth_ > 0) --depth_;
}

void JsonWriter::key(const char* k) {
  before_value();
  after_key_ = true;
  // Keys are short printable ASCII literals: written in place, in one go.
  constexpr size_t kShort = 48;
  if (char* d = sink_->reserve(kShort + 3)) {
    size_t n = 0;
    d[0] = '"';
    for (; n < kShort; ++n) {
      unsigned char c = static_cast<unsigned char>(k[n]);
      if (c == 0 || c < 0x20 || c >= 0x7f || c == '"' || c == '\\') break;
      d[1 + n] = static_cast<char>(c);
    }
    if (k[n] == '\0') {
      d[1 + n] = '"';
      d[2 + n] = ':';
      sink_->commit(n + 3);
      return;
    }
  }
  sink_->put('"');
  escape_to(sink_, k, str_len(k));
  sink_->put("\":", 2);
}

// Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid.
static size_t utf8_seq_len(const unsigned char* s, size_t n) {
  unsigned char c = s[0];
  size_t len;
  uint32_t min;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) {
    len = 2, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4, min = 0x10000;
  } else {
    return 0;
  }
  if (len > n) return 0;
  uint32_t cp = c & (0x7f >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

bool JsonWriter::escape_to(FdSink* sink, const char* s, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  bool valid = true;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s);
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', static_cast<char>(c)};
      sink->put(esc, 2);
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      switch (c) {
        case '\n':
          sink->put("\\n", 2);
          break;
        case '\t':
          sink->put("\\t", 2);
          break;
        case '\r':
          sink->put("\\r", 2);
          break;
        default:
          sink->put(esc, 6);
      }
      ++i;
    } else if (c < 0x80) {
      // A run of plain ASCII goes out in one piece.
      size_t j = i + 1;
      while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '"' && p[j] != '\\') ++j;
      sink->put(s + i, j - i);
      i = j;
    } else {
      size_t len = utf8_seq_len(p + i, n - i);
      if (len == 0) {
        sink->put("\xef\xbf\xbd", 3);  // U+FFFD
        valid = false;
        ++i;
      } else {
        sink->put(s + i, len);
        i += len;
      }
    }
  }
  return valid;
}

void JsonWriter::str(const char* s) {
  if (!s) return null();
  str_n(s, str_len(s));
}

void JsonWriter::str_n(const char* s, size_t n) {
  before_value();
  sink_->put('"');
  escape_to(sink_, s, n);
  sink_->put('"');
}

void JsonWriter::str_exact(const char* k, const char* v, size_t n) {
  key(k);
  before_value();
  sink_->put('"');
  bool valid = escape_to(sink_, v, n);
  sink_->put('"');
  if (!valid) {
    char name[64];
    StrBuf b(name, sizeof name);
    b.add(k).add("_hex");
    key(name);
    before_value();
    sink_->put('"');
    char hex[64];
    for (size_t i = 0; i < n; i += 16) {
      size_t chunk = n - i < 16 ? n - i : 16;
      sink_->put(hex, fmt_hex_bytes(hex, reinterpret_cast<const uint8_t*>(v) + i, chunk));
    }
    sink_->put('"');
  }
}

void JsonWriter::field_plain(const char* k, const char* v, size_t n) {
  key(k);
  before_value();
  sink_->put('"');
  sink_->put(v, n);
  sink_->put('"');
}

bool JsonWriter::is_plain(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
  }
  return true;
}

void JsonWriter::num(int64_t v) {
  before_value();
  char tmp[24];
  sink_->put(tmp, fmt_sdec(tmp, v));
}

void JsonWriter::unum(uint64_t v) {
  before_value();
  char tmp[24];
  sink_->put(tmp, fmt_dec(tmp, v));
}

void JsonWriter::hex(uint64_t v) {
  before_value();
  if (char* d = sink_->reserve(20)) {  // '"' + "0x" + 16 digits + '"'
    d[0] = '"';
    size_t n = fmt_hex(d + 1, v);
    d[1 + n] = '"';
    sink_->commit(n + 2);
    return;
  }
  char tmp[24];
  sink_->put('"');
  sink_->put(tmp, fmt_hex(tmp, v));
  sink_->put('"');
}

void JsonWriter::boolean(bool v) {
  before_value();
  if (v) {
    sink_->put("true", 4);
  } else {
    sink_->put("false", 5);
  }
}

void JsonWriter::null() {
  before_value();
  sink_->put("null", 4);
}

}  // namespace faultline::core
