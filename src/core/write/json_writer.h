// JsonWriter: an allocation-free, streaming JSON writer for the crash path.
//
// Output goes through a fixed buffer to a file descriptor (flushed when full),
// so a report of any size needs only the buffer. Strings are escaped for any
// byte sequence: valid UTF-8 passes through, control characters become \uXXXX,
// and each byte of an invalid UTF-8 sequence becomes U+FFFD. str_exact()
// additionally writes "<key>_hex" with the raw bytes when the value was not
// valid UTF-8, so nothing is lost (paths on Linux are bytes, not text).
//
// Async-signal-safe: only write(2). Commas and nesting are tracked on a fixed
// stack (kMaxDepth levels; deeper nesting is ignored rather than overflowing).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace faultline::core {

class FdSink {
 public:
  // `buf` is caller memory (the arena). fd < 0 discards output but counts it.
  FdSink(int fd, char* buf, size_t cap);
  // Inline: a report of 256 threads puts a few hundred thousand pieces.
  void put(const char* s, size_t n) {
    total_ += n;
    if (n <= cap_ - len_) {  // the common case: it fits
      char* d = buf_ + len_;
      if (n <= 16) {
        // Most pieces are a few bytes: a loop beats a call to memcpy.
        for (size_t i = 0; i < n; ++i) d[i] = s[i];
      } else {
        __builtin_memcpy(d, s, n);
      }
      len_ += n;
      return;
    }
    put_slow(s, n);
  }
  // Room for n bytes written in place, then commit(n); nullptr when the
  // buffer has less room (the caller then uses put()).
  char* reserve(size_t n) { return n <= cap_ - len_ ? buf_ + len_ : nullptr; }
  void commit(size_t n) {
    len_ += n;
    total_ += n;
  }
  void put(char c) { put(&c, 1); }
  bool flush();
  bool failed() const { return failed_; }
  int error() const { return errno_; }
  uint64_t bytes() const { return total_; }
  void set_fd(int fd) { fd_ = fd; }

 private:
  void put_slow(const char* s, size_t n);
  int fd_;
  char* buf_;
  size_t cap_;
  size_t len_ = 0;
  uint64_t total_ = 0;
  bool failed_ = false;
  int errno_ = 0;
  bool is_pipe_ = false;  // writes limited to PIPE_BUF after each poll
};

class JsonWriter {
 public:
  explicit JsonWriter(FdSink* sink) : sink_(sink) {}

  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(const char* k);

  // Values (inside arrays or after key()).
  void str(const char* s);  // nullptr writes null
  void str_n(const char* s, size_t n);
  void num(int64_t v);
  void unum(uint64_t v);
  void hex(uint64_t v);  // "0x..."
  void boolean(bool v);
  void null();

  // key + value shorthands.
  void field_str(const char* k, const char* v) { key(k), str(v); }
  void field_num(const char* k, int64_t v) { key(k), num(v); }
  void field_hex(const char* k, uint64_t v) { key(k), hex(v); }
  void field_bool(const char* k, bool v) { key(k), boolean(v); }
  // Writes k: v, and k_hex: raw bytes in hex if v was not valid UTF-8.
  void str_exact(const char* k, const char* v, size_t n);
  // Writes k: v for a v that is_plain() said needs no escaping.
  void field_plain(const char* k, const char* v, size_t n);
  // True when s is printable ASCII without '"' or '\\': JSON as it is.
  static bool is_plain(const char* s, size_t n);

  // Room for a whole value of up to n bytes, written in place and then
  // committed with commit_value(); the comma before it is written here.
  // nullptr (and nothing written) when the sink's buffer cannot make room:
  // the caller then writes the value piece by piece.
  char* reserve_value(size_t n);
  void commit_value(size_t n) { sink_->commit(n); }

  // Writes a string escaped as JSON string content (no quotes) to a sink.
  // Returns true if the input was valid UTF-8.
  static bool escape_to(FdSink* sink, const char* s, size_t n);

 private:
  void before_value();
  static constexpr int kMaxDepth = 32;
  FdSink* sink_;
  int depth_ = 0;
  bool need_comma_[kMaxDepth] = {};
  bool after_key_ = false;
};

}  // namespace faultline::core
