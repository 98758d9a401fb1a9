// Reading the unwinder's inputs through the SafeReader: a byte stream over
// call-frame records and expressions (LEB128, .eh_frame pointer encodings),
// and a window over stack memory. Header-only; async-signal-safe.
#pragma once

#include <stdint.h>

#include "core/base/safe_read.h"

namespace faultline::core::cfi {

// Reads remote bytes sequentially through a small buffer, never past `end`,
// and never more than the page holds when a bigger read fails (a record
// may end right before an unmapped page).
class Stream {
 public:
  Stream(uintptr_t addr, uintptr_t end) : pos_(addr), end_(end) {}
  // A stream over [addr, end) that starts with this one's buffer: the bytes
  // already read are not read again (a record's instructions follow its
  // header, and one read usually held both).
  Stream at(uintptr_t addr, uintptr_t end) const {
    Stream t = *this;
    t.pos_ = addr;
    t.end_ = end;
    t.ok_ = true;
    return t;
  }
  uintptr_t pos() const { return pos_; }
  uintptr_t end() const { return end_; }
  void set_end(uintptr_t end) { end_ = end; }
  // Forward only and within the record: a length read from the table
  // (an expression's, the augmentation's) that points before the current
  // position (an unsigned wrap) or past the end would loop or run away.
  void seek(uintptr_t pos) {
    if (pos < pos_ || pos > end_) {
      ok_ = false;
      return;
    }
    pos_ = pos;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ >= end_; }

  uint8_t u8() {
    if (!ok_ || pos_ >= end_) {
      ok_ = false;
      return 0;
    }
    if (pos_ < base_ || pos_ >= base_ + len_) {
      if (!refill()) {
        ok_ = false;
        return 0;
      }
    }
    return buf_[pos_++ - base_];
  }
  uint64_t fixed(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = u8();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok_ = false;
    return 0;
  }
  int64_t sleb() {
    uint64_t v = 0;
    int shift = 0;
    uint8_t b;
    do {
      if (shift >= 64) {
        ok_ = false;
        return 0;
      }
      b = u8();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~static_cast<uint64_t>(0) << shift;
    return static_cast<int64_t>(v);
  }
  // A pointer in an .eh_frame encoding. `datarel` is the base for
  // DW_EH_PE_datarel (the .eh_frame_hdr start); 0 where it cannot occur.
  uintptr_t encoded(uint8_t enc, uintptr_t datarel = 0) {
    if (enc == 0xff) return 0;  // DW_EH_PE_omit
    uintptr_t field = pos_;
    uint64_t v;
    switch (enc & 0x0f) {
      case 0x00:
        v = fixed(8);
        break;
      case 0x01:
        v = uleb();
        break;
      case 0x02:
        v = fixed(2);
        break;
      case 0x03:
        v = fixed(4);
        break;
      case 0x04:
        v = fixed(8);
        break;
      case 0x09:
        v = static_cast<uint64_t>(sleb());
        break;
      case 0x0a:
        v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(fixed(2))));
        break;
      case 0x0b:
        v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(fixed(4))));
        break;
      case 0x0c:
        v = fixed(8);
        break;
      default:
        ok_ = false;
        return 0;
    }
    switch (enc & 0x70) {
      case 0x00:
        break;
      case 0x10:
        v += field;
        break;
      case 0x30:
        if (!datarel) ok_ = false;
        v += datarel;
        break;
      default:
        ok_ = false;
        return 0;  // textrel, funcrel, aligned: not used on x86-64
    }
    if (enc & 0x80) {  // indirect
      uintptr_t p = 0;
      if (!safe_read_obj(&p, v)) ok_ = false;
      v = p;
    }
    return v;
  }

 private:
  bool refill() {
    uintptr_t n = end_ - pos_;
    if (n > sizeof buf_) n = sizeof buf_;
    if (safe_read(buf_, pos_, n)) {
      base_ = pos_;
      len_ = n;
      return true;
    }
    uintptr_t page_left = 4096 - (pos_ & 4095);
    if (page_left < n && safe_read(buf_, pos_, page_left)) {
      base_ = pos_;
      len_ = page_left;
      return true;
    }
    return false;
  }

  uintptr_t pos_, end_;
  uintptr_t base_ = 0, len_ = 0;
  bool ok_ = true;
  uint8_t buf_[256];
};

// Stack memory, read through a window: a frame's saved registers lie a few
// bytes apart and the caller's just above, so one read serves many.
class StackWindow {
 public:
  bool read(uintptr_t addr, uintptr_t* out) {
    if (addr < base_ || addr + sizeof *out > base_ + len_ || addr + sizeof *out < addr) {
      if (!refill(addr)) return safe_read_obj(out, addr);
    }
    __builtin_memcpy(out, buf_ + (addr - base_), sizeof *out);
    return true;
  }

 private:
  bool refill(uintptr_t addr) {
    if (safe_read(buf_, addr, sizeof buf_)) {
      base_ = addr;
      len_ = sizeof buf_;
      return true;
    }
    uintptr_t page_left = 4096 - (addr & 4095);
    if (page_left >= sizeof(uintptr_t) && page_left < sizeof buf_ &&
        safe_read(buf_, addr, page_left)) {
      base_ = addr;
      len_ = page_left;
      return true;
    }
    return false;
  }

  uintptr_t base_ = 0, len_ = 0;
  // 2 KiB: a ~40-byte frame's caller lies just above it, so one read (a
  // system call, ~2 us in a virtual machine) serves some fifty frames.
  uint8_t buf_[2048];
};

}  // namespace faultline::core::cfi
