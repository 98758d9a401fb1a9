// Unicode objects and line tables, read from a possibly corrupt interpreter.
#include "core/python/text.h"

#include "core/base/safe_read.h"

namespace faultline::core::python {
namespace {

// Sequential reader over interpreter bytes, refilled through safe_read in
// 512-byte chunks (one syscall covers a typical function's line table).
class ByteStream {
 public:
  ByteStream(uintptr_t addr, long len) : addr_(addr), len_(len) {}
  // False at the end or when memory could not be read.
  bool next(uint8_t* b) {
    if (pos_ >= len_) return false;
    if (pos_ >= buf_pos_ + buf_len_) {
      long want = len_ - pos_;
      if (want > static_cast<long>(sizeof buf_)) want = sizeof buf_;
      if (!safe_read(buf_, addr_ + static_cast<uintptr_t>(pos_), static_cast<size_t>(want))) {
        failed_ = true;
        return false;
      }
      buf_pos_ = pos_;
      buf_len_ = want;
    }
    *b = buf_[pos_ - buf_pos_];
    ++pos_;
    return true;
  }
  // Peeks without consuming.
  bool peek(uint8_t* b) {
    if (!next(b)) return false;
    --pos_;
    return true;
  }
  bool failed() const { return failed_; }

 private:
  uintptr_t addr_;
  long len_;
  long pos_ = 0;
  long buf_pos_ = 0;
  long buf_len_ = 0;
  bool failed_ = false;
  uint8_t buf_[512];
};

// Appends code point cp as UTF-8; lone surrogates (surrogateescape'd bytes
// in file names) become U+FFFD so the report stays valid UTF-8.
size_t put_utf8(char* out, uint32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

// Reads a 6-bit-chunk varint of the 3.11+ location table.
bool read_varint(ByteStream* s, uint32_t* out) {
  uint8_t b;
  if (!s->next(&b)) return false;
  uint32_t val = b & 63;
  uint32_t shift = 0;
  // At most 6 continuation bytes: 36 bits covers any int line delta.
  for (int i = 0; (b & 64) && i < 6; ++i) {
    if (!s->next(&b)) return false;
    shift += 6;
    val |= static_cast<uint32_t>(b & 63) << shift;
  }
  *out = val;
  return true;
}

bool read_svarint(ByteStream* s, int* out) {
  uint32_t u;
  if (!read_varint(s, &u)) return false;
  *out = (u & 1) ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
  return true;
}

// 3.9 co_lnotab: (address increment, signed line increment) byte pairs.
int lnotab_line(ByteStream* s, int firstlineno, long offset) {
  int line = firstlineno;
  long addr = 0;
  uint8_t a, d;
  while (s->next(&a) && s->next(&d)) {
    addr += a;
    if (addr > offset) break;
    line += static_cast<int8_t>(d);
  }
  return s->failed() ? -1 : line;
}

// 3.10 co_linetable: (start delta, line delta) pairs; line delta -128 means
// "no line"; zero-width entries only move the running line.
int linetable310_line(ByteStream* s, int firstlineno, long offset) {
  int line = firstlineno;
  long start = 0;
  uint8_t sd, ld;
  while (s->next(&sd) && s->next(&ld)) {
    long end = start + sd;
    int8_t delta = static_cast<int8_t>(ld);
    int entry_line = -1;
    if (delta != -128) {
      line += delta;
      entry_line = line;
    }
    if (end > start && offset >= start && offset < end) return entry_line;
    start = end;
  }
  return -1;
}

// 3.11+ location table: entries whose first byte has bit 7 set; bits 3-6 are
// the form, bits 0-2 the length in code units minus one.
int locations_line(ByteStream* s, int firstlineno, long offset) {
  int line = firstlineno;
  long start = 0;
  uint8_t first;
  while (s->next(&first)) {
    if (!(first & 0x80)) return -1;  // out of step: table corrupt
    int code = (first >> 3) & 15;
    long end = start + ((first & 7) + 1) * 2;
    int delta = 0;
    if (code == 13 || code == 14) {
      if (!read_svarint(s, &delta)) return -1;
    } else if (code >= 10 && code <= 12) {
      delta = code - 10;
    }
    line += delta;
    int entry_line = code == 15 ? -1 : line;
    if (offset >= start && offset < end) return entry_line;
    // Skip the rest of the entry: everything up to the next byte with bit 7.
    uint8_t b;
    while (s->peek(&b) && !(b & 0x80)) s->next(&b);
    start = end;
  }
  return -1;
}

}  // namespace

const char* read_unicode(const PyLayout& l, uintptr_t addr, const uint8_t* pre, size_t got,
                         uintptr_t unicode_type, Arena* arena, TextError* err) {
  uint8_t own[128];
  size_t need = static_cast<size_t>(l.str_compact_size + 8);
  const uint8_t* hdr = pre;
  if (addr == 0 || !pre || got < need) {
    if (addr == 0 || need > sizeof own || !safe_read(own, addr, need)) {
      err->what = "string object unreadable";
      return nullptr;
    }
    hdr = own;
    got = 0;  // nothing of the characters is here either
  }
  uintptr_t type;
  __builtin_memcpy(&type, hdr + l.ob_type, sizeof type);
  if (unicode_type && type != unicode_type) {
    err->what = "not a str object";
    return nullptr;
  }
  uint32_t state;
  int64_t length;
  __builtin_memcpy(&state, hdr + l.str_state, sizeof state);
  __builtin_memcpy(&length, hdr + l.str_length, sizeof length);
  uint32_t kind = (state >> 2) & 7;
  bool compact = (state >> 5) & 1;
  bool ascii = (state >> 6) & 1;
  if (length < 0 || length > (1 << 30) || (kind != 1 && kind != 2 && kind != 4) ||
      (ascii && kind != 1)) {
    err->what = "str object header invalid";
    return nullptr;
  }
  uintptr_t data;
  if (compact) {
    data = addr + static_cast<uintptr_t>(ascii ? l.str_ascii_size : l.str_compact_size);
  } else {
    __builtin_memcpy(&data, hdr + l.str_data_any, sizeof data);
  }
  long n = length > kMaxStringChars ? kMaxStringChars : static_cast<long>(length);
  char out[kMaxStringChars * 4 + 4];
  size_t o = 0;
  auto decode = [&](const uint8_t* raw, long take) {
    for (long i = 0; i < take; ++i) {
      uint32_t cp;
      if (kind == 1) {
        cp = raw[i];
      } else if (kind == 2) {
        uint16_t v;
        __builtin_memcpy(&v, raw + i * 2, 2);
        cp = v;
      } else {
        __builtin_memcpy(&cp, raw + i * 4, 4);
      }
      o += put_utf8(out + o, cp);
    }
  };
  size_t at = data - addr;  // where the characters are in pre, if compact
  if (compact && got > 0 && at <= got && static_cast<size_t>(n) * kind <= got - at) {
    decode(pre + at, n);
  } else {
    uint8_t raw[1024];
    long per_chunk = static_cast<long>(sizeof raw / kind);
    for (long done = 0; done < n;) {
      long take = n - done < per_chunk ? n - done : per_chunk;
      if (!safe_read(raw, data + static_cast<uintptr_t>(done) * kind,
                     static_cast<size_t>(take) * kind)) {
        err->what = "str data unreadable";
        return nullptr;
      }
      decode(raw, take);
      done += take;
    }
  }
  if (n < length) {
    out[o++] = '.';
    out[o++] = '.';
    out[o++] = '.';
  }
  out[o] = '\0';
  const char* s = arena->dup(out, o);
  if (!s) err->what = "arena exhausted";
  return s;
}

int line_for_offset(LineTableKind kind, uintptr_t table, long len, int firstlineno, long offset) {
  if (offset < 0) return firstlineno;
  if (len < 0 || len > (16 << 20)) return -1;
  ByteStream s(table, len);
  switch (kind) {
    case LineTableKind::kLnotab:
      return lnotab_line(&s, firstlineno, offset);
    case LineTableKind::kLinetable:
      return linetable310_line(&s, firstlineno, offset);
    case LineTableKind::kLocations:
      return locations_line(&s, firstlineno, offset);
  }
  return -1;
}

}  // namespace faultline::core::python
