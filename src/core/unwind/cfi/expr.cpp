#include "core/unwind/cfi/expr.h"

#include "core/unwind/cfi/stream.h"

namespace faultline::core::cfi {

// A DWARF expression of the kinds call-frame information uses.
bool eval_expr(uintptr_t addr, uint32_t len, const CfiRegs& regs, bool push_cfa, uintptr_t cfa,
               uintptr_t* out) {
  constexpr int kDepth = 16;
  uintptr_t st[kDepth];
  int sp = 0;
  if (push_cfa) st[sp++] = cfa;
  Stream s(addr, addr + len);
  auto reg_value = [&](uint64_t r, uintptr_t* v) {
    if (r >= kCfiNumRegs || !(regs.valid & cfi_bit(r))) return false;
    *v = regs.r[r];
    return true;
  };
  while (!s.at_end()) {
    uint8_t op = s.u8();
    if (!s.ok()) return false;
    uintptr_t a, b;
    if (op >= 0x30 && op <= 0x4f) {  // lit0..31
      if (sp >= kDepth) return false;
      st[sp++] = op - 0x30;
      continue;
    }
    if (op >= 0x50 && op <= 0x6f) {  // reg0..31
      if (sp >= kDepth || !reg_value(op - 0x50, &a)) return false;
      st[sp++] = a;
      continue;
    }
    if (op >= 0x70 && op <= 0x8f) {  // breg0..31
      int64_t off = s.sleb();
      if (sp >= kDepth || !reg_value(op - 0x70, &a)) return false;
      st[sp++] = a + static_cast<uintptr_t>(off);
      continue;
    }
    switch (op) {
      case 0x03:  // addr
      case 0x08:
      case 0x09:
      case 0x0a:
      case 0x0b:
      case 0x0c:
      case 0x0d:
      case 0x0e:
      case 0x0f:
      case 0x10:
      case 0x11: {
        uint64_t v;
        switch (op) {
          case 0x03:
            v = s.fixed(8);
            break;
          case 0x08:
            v = s.fixed(1);
            break;
          case 0x09:
            v = static_cast<uint64_t>(static_cast<int8_t>(s.fixed(1)));
            break;
          case 0x0a:
            v = s.fixed(2);
            break;
          case 0x0b:
            v = static_cast<uint64_t>(static_cast<int16_t>(s.fixed(2)));
            break;
          case 0x0c:
            v = s.fixed(4);
            break;
          case 0x0d:
            v = static_cast<uint64_t>(static_cast<int32_t>(s.fixed(4)));
            break;
          case 0x0e:
          case 0x0f:
            v = s.fixed(8);
            break;
          case 0x10:
            v = s.uleb();
            break;
          default:
            v = static_cast<uint64_t>(s.sleb());
            break;
        }
        if (sp >= kDepth) return false;
        st[sp++] = v;
        break;
      }
      case 0x92: {  // bregx
        uint64_t r = s.uleb();
        int64_t off = s.sleb();
        if (sp >= kDepth || !reg_value(r, &a)) return false;
        st[sp++] = a + static_cast<uintptr_t>(off);
        break;
      }
      case 0x06:  // deref
        if (sp < 1 || !safe_read_obj(&a, st[sp - 1])) return false;
        st[sp - 1] = a;
        break;
      case 0x12:  // dup
        if (sp < 1 || sp >= kDepth) return false;
        st[sp] = st[sp - 1];
        ++sp;
        break;
      case 0x13:  // drop
        if (sp < 1) return false;
        --sp;
        break;
      case 0x14:  // over
        if (sp < 2 || sp >= kDepth) return false;
        st[sp] = st[sp - 2];
        ++sp;
        break;
      case 0x16:  // swap
        if (sp < 2) return false;
        a = st[sp - 1];
        st[sp - 1] = st[sp - 2];
        st[sp - 2] = a;
        break;
      case 0x23:  // plus_uconst
        if (sp < 1) return false;
        st[sp - 1] += s.uleb();
        break;
      case 0x96:
        break;  // nop
      default: {
        if (sp < 2) return false;
        b = st[--sp];
        a = st[sp - 1];
        uintptr_t r;
        switch (op) {
          case 0x1a:
            r = a & b;
            break;
          case 0x1c:
            r = a - b;
            break;
          case 0x21:
            r = a | b;
            break;
          case 0x22:
            r = a + b;
            break;
          case 0x24:
            r = b >= 64 ? 0 : a << b;
            break;
          case 0x25:
            r = b >= 64 ? 0 : a >> b;
            break;
          case 0x26:
            r = static_cast<uintptr_t>(static_cast<int64_t>(a) >> (b >= 64 ? 63 : b));
            break;
          case 0x27:
            r = a ^ b;
            break;
          case 0x29:
            r = a == b;
            break;
          case 0x2a:
            r = static_cast<int64_t>(a) >= static_cast<int64_t>(b);
            break;
          case 0x2b:
            r = static_cast<int64_t>(a) > static_cast<int64_t>(b);
            break;
          case 0x2c:
            r = static_cast<int64_t>(a) <= static_cast<int64_t>(b);
            break;
          case 0x2d:
            r = static_cast<int64_t>(a) < static_cast<int64_t>(b);
            break;
          case 0x2e:
            r = a != b;
            break;
          default:
            return false;  // anything else: leave it to the fallback
        }
        st[sp - 1] = r;
        break;
      }
    }
    if (!s.ok()) return false;
  }
  if (sp < 1) return false;
  *out = st[sp - 1];
  return true;
}

}  // namespace faultline::core::cfi
