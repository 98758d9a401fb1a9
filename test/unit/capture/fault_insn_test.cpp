#include "core/capture/fault_insn.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

using namespace faultline::core;

namespace {

struct Regs {
  greg_t g[NGREG] = {};
  Regs& set(int r, uint64_t v) {
    g[r] = static_cast<greg_t>(v);
    return *this;
  }
};

struct Code {
  uint8_t b[16] = {};
  size_t n = sizeof b;
  Code(std::initializer_list<int> bytes) {
    size_t i = 0;
    for (int x : bytes) b[i++] = static_cast<uint8_t>(x);
    for (; i < sizeof b; ++i) b[i] = 0x90;  // what follows: nops
  }
};

bool faults_at(const Code& c, const Regs& r, uint64_t cr2) {
  return insn_could_fault_at(c.b, c.n, r.g, cr2);
}

}  // namespace

TEST_CASE("a load from an absolute address faults there and nowhere else") {
  Code mov_abs = {0x8b, 0x04, 0x25, 0x10, 0x00, 0x00, 0x00};  // mov eax, [0x10]
  Regs r;
  CHECK(faults_at(mov_abs, r, 0x10));
  CHECK(faults_at(mov_abs, r, 0x13));
  CHECK_FALSE(faults_at(mov_abs, r, 0x1234));
}

TEST_CASE("base, index, scale and displacement") {
  Regs r;
  r.set(REG_RDI, 0x7f0000001000).set(REG_RAX, 3);
  Code load = {0x48, 0x8b, 0x07};  // mov rax, [rdi]
  CHECK(faults_at(load, r, 0x7f0000001000));
  CHECK_FALSE(faults_at(load, r, 0x7f0000100000));
  Code sib = {0x8b, 0x4c, 0x87, 0x08};  // mov ecx, [rdi + rax*4 + 8]
  CHECK(faults_at(sib, r, 0x7f0000001000 + 12 + 8));
  Code r12 = {0x43, 0x8b, 0x04, 0xa4};  // mov eax, [r12 + r12*4]: REX.X makes index 4 r12
  r.set(REG_R12, 0x1000);
  CHECK(faults_at(r12, r, 0x5000));
}

TEST_CASE("VEX and EVEX loads") {
  Regs r;
  r.set(REG_RDI, 0x600000).set(REG_RAX, 0x10).set(REG_RSP, 0x7ffd0000);
  Code vex = {0xc5, 0xfc, 0x10, 0x04, 0x87};  // vmovups ymm0, [rdi + rax*4]
  CHECK(faults_at(vex, r, 0x600040));
  CHECK_FALSE(faults_at(vex, r, 0x900000));
  // vmovups zmm0, [rsp + 1*64]: EVEX scales disp8 by the vector size.
  Code evex = {0x62, 0xf1, 0x7c, 0x48, 0x10, 0x44, 0x24, 0x01};
  CHECK(faults_at(evex, r, 0x7ffd0040));
  CHECK_FALSE(faults_at(evex, r, 0x100000));
}

TEST_CASE("implicit stack and string accesses") {
  Regs r;
  r.set(REG_RSP, 0x7ffd0000).set(REG_RSI, 0x500000).set(REG_RDI, 0x600000);
  CHECK(faults_at(Code{0x50}, r, 0x7ffd0000 - 8));          // push rax
  CHECK(faults_at(Code{0xe8, 0, 0, 0, 0}, r, 0x7ffcfff8));  // call
  CHECK_FALSE(faults_at(Code{0x50}, r, 0x1234));
  CHECK(faults_at(Code{0xf3, 0xa4}, r, 0x600010));  // rep movsb
  CHECK(faults_at(Code{0xf3, 0xa4}, r, 0x500010));
  CHECK_FALSE(faults_at(Code{0xf3, 0xa4}, r, 0x700000));
}

TEST_CASE("what does not access memory, or cannot be placed, never matches") {
  Regs r;
  CHECK_FALSE(faults_at(Code{0x48, 0x8d, 0x04, 0x25, 0x10, 0, 0, 0}, r, 0x10));  // lea
  CHECK_FALSE(faults_at(Code{0x48, 0x01, 0xc8}, r, 0));                          // add rax, rcx
  CHECK_FALSE(faults_at(Code{0x8b, 0x05, 0x10, 0, 0, 0}, r, 0x10));              // rip-relative
  CHECK_FALSE(faults_at(Code{0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}, r, 0x28));  // fs:
  CHECK_FALSE(faults_at(Code{0xeb, 0xfe}, r, 0));                                      // jmp .
}

TEST_CASE("a division faults only by 0, or by -1 for idiv") {
  Regs r;
  Code div_rcx = {0x48, 0xf7, 0xf1};   // div rcx
  Code idiv_rcx = {0x48, 0xf7, 0xf9};  // idiv rcx
  r.set(REG_RCX, 0);
  CHECK(insn_divides_by_zero(div_rcx.b, div_rcx.n, r.g));
  r.set(REG_RCX, 7);
  CHECK_FALSE(insn_divides_by_zero(div_rcx.b, div_rcx.n, r.g));
  r.set(REG_RCX, ~0ull);
  CHECK(insn_divides_by_zero(idiv_rcx.b, idiv_rcx.n, r.g));
  CHECK_FALSE(insn_divides_by_zero(div_rcx.b, div_rcx.n, r.g));
  // div ecx: only the low 32 bits divide.
  Code div_ecx = {0xf7, 0xf1};
  r.set(REG_RCX, 0x100000000);
  CHECK(insn_divides_by_zero(div_ecx.b, div_ecx.n, r.g));
  // div ah (no REX: register 4 is ah).
  Code div_ah = {0xf6, 0xf4};
  r.set(REG_RAX, 0x0012);
  CHECK(insn_divides_by_zero(div_ah.b, div_ah.n, r.g));
  r.set(REG_RAX, 0x0300);
  CHECK_FALSE(insn_divides_by_zero(div_ah.b, div_ah.n, r.g));
  // div dword [rsi]: read through safe_read.
  static uint32_t divisor = 0;
  Code div_mem = {0xf7, 0x36};
  r.set(REG_RSI, reinterpret_cast<uintptr_t>(&divisor));
  CHECK(insn_divides_by_zero(div_mem.b, div_mem.n, r.g));
  divisor = 5;
  CHECK_FALSE(insn_divides_by_zero(div_mem.b, div_mem.n, r.g));
  // Not a division.
  Code mul = {0x48, 0xf7, 0xe1};  // mul rcx
  r.set(REG_RCX, 0);
  CHECK_FALSE(insn_divides_by_zero(mul.b, mul.n, r.g));
}
