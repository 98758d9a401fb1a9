#include "core/capture/fault_insn.h"

#include "core/base/safe_read.h"

namespace faultline::core {
namespace {

// The general registers by their encoding number (REX-extended: 0-15).
constexpr int kRegs[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                           REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};

uint64_t reg(const greg_t* g, int n) {
  return static_cast<uint64_t>(g[kRegs[n & 15]]);
}

// One-byte opcodes that take a ModRM byte (64-bit mode; 62, C4 and C5 are
// EVEX and VEX there, 0F the escape).
bool one_byte_has_modrm(uint8_t op) {
  if (op < 0x40) return (op & 7) < 4;  // the ALU rows: 00-03, 08-0B, ... 38-3B
  if (op == 0x63 || op == 0x69 || op == 0x6B) return true;
  if (op >= 0x80 && op <= 0x8F) return true;
  if (op == 0xC0 || op == 0xC1 || op == 0xC6 || op == 0xC7) return true;
  if (op >= 0xD0 && op <= 0xD3) return true;
  if (op >= 0xD8 && op <= 0xDF) return true;  // x87
  return op == 0xF6 || op == 0xF7 || op == 0xFE || op == 0xFF;
}

// 0F xx opcodes without a ModRM byte; the rest of the map has one.
bool two_byte_has_modrm(uint8_t op) {
  if (op == 0x05 || op == 0x06 || op == 0x07 || op == 0x08 || op == 0x09 || op == 0x0B ||
      op == 0x0E || op == 0x77 || op == 0xA0 || op == 0xA1 || op == 0xA2 || op == 0xA8 ||
      op == 0xA9 || op == 0xAA) {
    return false;
  }
  if (op >= 0x30 && op <= 0x37) return false;  // wrmsr, rdtsc, ..., getsec
  if (op >= 0x80 && op <= 0x8F) return false;  // jcc rel32
  return !(op >= 0xC8 && op <= 0xCF);          // bswap
}

uint64_t size_mask(int bytes) {
  return bytes >= 8 ? ~0ull : (1ull << (bytes * 8)) - 1;
}

// x in [center - below, center + above), without wrapping at either end.
bool near(uint64_t x, uint64_t center, uint64_t below, uint64_t above) {
  uint64_t lo = center >= below ? center - below : 0;
  uint64_t hi = center <= ~0ull - above ? center + above : ~0ull;
  return x >= lo && x < hi;
}

}  // namespace

bool decode_operand(const uint8_t* code, size_t n, const greg_t* gregs, InsnOperand* op) {
  *op = {};
  size_t i = 0;
  bool opsize16 = false, addr32 = false, segment = false;
  for (; i < n && i < 14; ++i) {
    uint8_t b = code[i];
    if (b == 0x66) {
      opsize16 = true;
    } else if (b == 0x67) {
      addr32 = true;
    } else if (b == 0x64 || b == 0x65) {
      segment = true;  // fs/gs: an address relative to a base we do not have
    } else if (b != 0xF0 && b != 0xF2 && b != 0xF3 && b != 0x2E && b != 0x36 && b != 0x3E &&
               b != 0x26) {
      break;
    }
  }
  int r = 0, x = 0, b = 0, w = 0;
  bool evex = false, vex = false;
  if (i < n && (code[i] & 0xF0) == 0x40) {
    op->rex = true;
    w = (code[i] >> 3) & 1;
    r = (code[i] >> 2) & 1;
    x = (code[i] >> 1) & 1;
    b = code[i] & 1;
    ++i;
  }
  if (i + 4 >= n) return false;
  if (code[i] == 0xC5) {  // two-byte VEX: R vvvv L pp, map 0F
    vex = true;
    r = !((code[i + 1] >> 7) & 1);
    op->map = 1;
    i += 2;
  } else if (code[i] == 0xC4) {  // three-byte VEX: R X B mmmmm, W vvvv L pp
    vex = true;
    r = !((code[i + 1] >> 7) & 1);
    x = !((code[i + 1] >> 6) & 1);
    b = !((code[i + 1] >> 5) & 1);
    op->map = code[i + 1] & 0x1F;
    w = (code[i + 2] >> 7) & 1;
    i += 3;
  } else if (code[i] == 0x62) {  // EVEX: R X B R' 0 m m m, W vvvv 1 pp, z L'L b V' aaa
    evex = true;
    r = !((code[i + 1] >> 7) & 1);
    x = !((code[i + 1] >> 6) & 1);
    b = !((code[i + 1] >> 5) & 1);
    op->map = code[i + 1] & 0x07;
    w = (code[i + 2] >> 7) & 1;
    i += 4;
  } else if (code[i] == 0x0F) {
    op->map = 1;
    ++i;
    if (code[i] == 0x38 || code[i] == 0x3A) {
      op->map = code[i] == 0x38 ? 2 : 3;
      ++i;
    }
  }
  if (i >= n) return false;
  op->opcode = code[i++];
  op->opsize = w ? 8 : opsize16 ? 2 : 4;
  if (op->map == 0 && (op->opcode == 0xF6 || op->opcode == 0x00 || op->opcode == 0x02 ||
                       op->opcode == 0x84 || op->opcode == 0x86 || op->opcode == 0x88 ||
                       op->opcode == 0x8A || op->opcode == 0xC6 || op->opcode == 0xFE)) {
    op->opsize = 1;
  }
  op->has_modrm = vex || evex || op->map >= 2 ||
                  (op->map == 1 ? two_byte_has_modrm(op->opcode) : one_byte_has_modrm(op->opcode));
  if (!op->has_modrm) return true;
  if (i >= n) return false;
  uint8_t modrm = code[i++];
  int mod = modrm >> 6;
  op->reg = ((modrm >> 3) & 7) | (r << 3);
  op->rm = (modrm & 7) | (b << 3);
  if (mod == 3) return true;                           // a register operand
  op->memory = !(op->map == 0 && op->opcode == 0x8D);  // lea computes, it does not access
  uint64_t address = 0;
  bool rip_relative = false, disp32 = mod == 2;
  if ((modrm & 7) == 4) {
    if (i >= n) return false;
    uint8_t sib = code[i++];
    int index = ((sib >> 3) & 7) | (x << 3);
    int base = (sib & 7) | (b << 3);
    if (index != 4) address += reg(gregs, index) << (sib >> 6);
    if ((sib & 7) == 5 && mod == 0) {
      disp32 = true;  // no base: disp32
    } else {
      address += reg(gregs, base);
    }
  } else if ((modrm & 7) == 5 && mod == 0) {
    rip_relative = true;
  } else {
    address = reg(gregs, op->rm);
  }
  op->disp_exact = true;
  if (mod == 1) {
    if (i >= n) return false;
    // EVEX scales a disp8 by the operand's size, which the rest of the
    // encoding decides: the address is left without it.
    if (evex) {
      op->disp_exact = false;
    } else {
      address += static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(code[i])));
    }
  } else if (disp32) {
    if (i + 4 > n) return false;
    int32_t d = static_cast<int32_t>(
        static_cast<uint32_t>(code[i]) | (static_cast<uint32_t>(code[i + 1]) << 8) |
        (static_cast<uint32_t>(code[i + 2]) << 16) | (static_cast<uint32_t>(code[i + 3]) << 24));
    address += static_cast<uint64_t>(static_cast<int64_t>(d));
  }
  op->address = address;
  op->address_ok = !segment && !addr32 && !rip_relative;
  return true;
}

bool insn_could_fault_at(const uint8_t* code, size_t n, const greg_t* gregs, uint64_t cr2) {
  InsnOperand op;
  if (!decode_operand(code, n, gregs, &op)) return false;
  const uint64_t rsp = reg(gregs, 4);
  if (op.map == 0 && !op.has_modrm) {
    uint8_t o = op.opcode;
    // Implicit stack accesses: push, pop, pushf, popf, call, ret, enter,
    // leave; an overflow faults just below rsp.
    if ((o >= 0x50 && o <= 0x5F) || o == 0x68 || o == 0x6A || o == 0x9C || o == 0x9D || o == 0xC2 ||
        o == 0xC3 || o == 0xC8 || o == 0xC9 || o == 0xE8) {
      return near(cr2, rsp, 65536, 4096);
    }
    // String operations: at rsi or rdi, moved on by what they did so far.
    if ((o >= 0xA4 && o <= 0xA7) || (o >= 0xAA && o <= 0xAF)) {
      uint64_t si = reg(gregs, 6), di = reg(gregs, 7);
      return near(cr2, si, 4096, 4096) || near(cr2, di, 4096, 4096);
    }
    return false;
  }
  if (op.map == 0 && op.has_modrm && (op.opcode == 0xFF || op.opcode == 0x8F)) {
    // call/push r/m and pop r/m touch the stack as well as their operand.
    if (near(cr2, rsp, 65536, 4096)) return true;
  }
  if (!op.memory || !op.address_ok) return false;
  // The access may be up to 64 bytes wide (AVX-512) and start anywhere in
  // it; an EVEX disp8 is up to 127 x 64 bytes off.
  uint64_t slack = op.disp_exact ? 64 : 8192 + 64;
  return near(cr2, op.address, slack, slack + 64);
}

bool insn_divides_by_zero(const uint8_t* code, size_t n, const greg_t* gregs) {
  InsnOperand op;
  if (!decode_operand(code, n, gregs, &op)) return false;
  if (op.map != 0 || (op.opcode != 0xF6 && op.opcode != 0xF7) || !op.has_modrm) return false;
  int kind = op.reg & 7;
  if (kind != 6 && kind != 7) return false;  // div, idiv
  uint64_t divisor = 0;
  if (!op.memory) {
    // Without REX, byte registers 4-7 are ah, ch, dh, bh.
    divisor = op.opsize == 1 && !op.rex && op.rm >= 4 && op.rm < 8 ? reg(gregs, op.rm - 4) >> 8
                                                                   : reg(gregs, op.rm);
  } else {
    if (!op.address_ok || !op.disp_exact) return false;
    if (!safe_read(&divisor, static_cast<uintptr_t>(op.address), static_cast<size_t>(op.opsize))) {
      return false;
    }
  }
  divisor &= size_mask(op.opsize);
  return divisor == 0 || (kind == 7 && divisor == size_mask(op.opsize));
}

}  // namespace faultline::core
