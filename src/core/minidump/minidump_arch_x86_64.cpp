// x86-64's part of the minidump (minidump_arch.h): CONTEXT_AMD64, with the
// FXSAVE area, and the processor from cpuid.
#include <cpuid.h>
#include <string.h>

#include "core/base/safe_read.h"
#include "core/minidump/minidump_arch.h"

namespace faultline::core {

using namespace md;

void minidump_save_regs(ArchThreadRegs* r, const ucontext_t& uc, bool foreign_fp) {
  __builtin_memcpy(r->gregs, uc.uc_mcontext.gregs, sizeof r->gregs);
  const auto at = reinterpret_cast<uintptr_t>(uc.uc_mcontext.fpregs);
  if (!at) {
    r->have_fp = false;
  } else if (foreign_fp) {
    // In the interrupted thread's signal frame: read like any foreign memory.
    r->have_fp = safe_read(&r->fp, at, sizeof r->fp);
  } else {
    __builtin_memcpy(&r->fp, uc.uc_mcontext.fpregs, sizeof r->fp);
    r->have_fp = true;
  }
}

uint64_t minidump_regs_sp(const ArchThreadRegs& r) {
  return static_cast<uint64_t>(r.gregs[REG_RSP]);
}

uint32_t minidump_fill_context(ContextRecord* rec, const ArchThreadRegs* r) {
  ContextAmd64* ctx = &rec->amd64;
  memset(ctx, 0, sizeof *ctx);
  ctx->context_flags = kContextAmd64;
  if (!r) return sizeof *ctx;
  const greg_t* g = r->gregs;
  ctx->context_flags = kContextControl | kContextInteger;
  ctx->rax = static_cast<uint64_t>(g[REG_RAX]);
  ctx->rbx = static_cast<uint64_t>(g[REG_RBX]);
  ctx->rcx = static_cast<uint64_t>(g[REG_RCX]);
  ctx->rdx = static_cast<uint64_t>(g[REG_RDX]);
  ctx->rsi = static_cast<uint64_t>(g[REG_RSI]);
  ctx->rdi = static_cast<uint64_t>(g[REG_RDI]);
  ctx->rbp = static_cast<uint64_t>(g[REG_RBP]);
  ctx->rsp = static_cast<uint64_t>(g[REG_RSP]);
  ctx->r8 = static_cast<uint64_t>(g[REG_R8]);
  ctx->r9 = static_cast<uint64_t>(g[REG_R9]);
  ctx->r10 = static_cast<uint64_t>(g[REG_R10]);
  ctx->r11 = static_cast<uint64_t>(g[REG_R11]);
  ctx->r12 = static_cast<uint64_t>(g[REG_R12]);
  ctx->r13 = static_cast<uint64_t>(g[REG_R13]);
  ctx->r14 = static_cast<uint64_t>(g[REG_R14]);
  ctx->r15 = static_cast<uint64_t>(g[REG_R15]);
  ctx->rip = static_cast<uint64_t>(g[REG_RIP]);
  ctx->eflags = static_cast<uint32_t>(g[REG_EFL]);
  uint64_t csgsfs = static_cast<uint64_t>(g[REG_CSGSFS]);
  ctx->cs = static_cast<uint16_t>(csgsfs & 0xffff);
  ctx->gs = static_cast<uint16_t>((csgsfs >> 16) & 0xffff);
  ctx->fs = static_cast<uint16_t>((csgsfs >> 32) & 0xffff);
  if (r->have_fp) {
    static_assert(sizeof r->fp == sizeof ctx->flt_save, "the FXSAVE area is 512 bytes");
    memcpy(ctx->flt_save, &r->fp, sizeof ctx->flt_save);
    ctx->context_flags |= kContextFloatingPoint;
    memcpy(&ctx->mx_csr, ctx->flt_save + 24, 4);
  }
  return sizeof *ctx;
}

void minidump_fill_cpu(SystemInfo* si) {
  si->processor_architecture = kCpuArchitectureAmd64;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    si->vendor_id[0] = b;
    si->vendor_id[1] = d;
    si->vendor_id[2] = c;
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    si->version_information = a;
    si->feature_information = d;
    unsigned family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    if (family == 0xf) family += (a >> 20) & 0xff;
    if (family == 0x6 || family >= 0xf) model += ((a >> 16) & 0xf) << 4;
    si->processor_level = static_cast<uint16_t>(family);
    si->processor_revision = static_cast<uint16_t>((model << 8) | (a & 0xf));
  }
  if (__get_cpuid(0x80000001, &a, &b, &c, &d)) si->amd_extended_features = d;
}

}  // namespace faultline::core
