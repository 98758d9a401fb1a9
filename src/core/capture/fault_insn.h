// Would the instruction at a context's pc have made the fault its trap
// number, error code and cr2 describe? The kernel keeps a thread's last
// fault in those fields for good (across fork and exec too), so a signal
// that reaches a thread later, from anywhere, carries them: they describe
// the signal only where the instruction the signal interrupted is that
// fault's. A page fault: the instruction reads or writes memory near cr2
// (its ModRM operand's address, a stack access near rsp, a string
// operation near rsi/rdi). A divide error: a div or idiv whose divisor is 0
// or -1. Decodes the legacy, VEX and EVEX encodings far enough for that;
// anything it cannot place answers false. Async-signal-safe: the bytes at
// pc and a memory divisor through safe_read, nothing else.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/ucontext.h>

namespace faultline::core {

// The decoded memory operand of one instruction.
struct InsnOperand {
  bool has_modrm;
  bool memory;       // a ModRM memory operand (not lea)
  bool address_ok;   // its address could be computed (no fs/gs, no 32-bit addressing)
  bool disp_exact;   // address includes its displacement (EVEX scales disp8: not exact)
  uint64_t address;  // base + index * scale (+ displacement when disp_exact)
  uint8_t opcode;    // the last opcode byte
  int map;           // 0: one-byte, 1: 0F, 2: 0F 38, 3: 0F 3A (VEX/EVEX map likewise)
  int reg;           // ModRM reg field (with REX.R)
  int rm;            // ModRM rm field (with REX.B), the register when !memory
  int opsize;        // operand size in bytes for integer ops: 1, 2, 4 or 8
  bool rex;          // a REX prefix (byte registers are spl..dil, not ah..bh)
};

// Decodes the instruction in code[0..n) with the registers in gregs.
bool decode_operand(const uint8_t* code, size_t n, const greg_t* gregs, InsnOperand* op);

// True when the instruction at gregs[REG_RIP] (its bytes in code[0..n))
// could have taken a page fault at cr2.
bool insn_could_fault_at(const uint8_t* code, size_t n, const greg_t* gregs, uint64_t cr2);

// True when it is a div or idiv whose divisor (a register, or memory read
// through safe_read) is 0, or -1 for idiv.
bool insn_divides_by_zero(const uint8_t* code, size_t n, const greg_t* gregs);

}  // namespace faultline::core
