// aarch64's part of the minidump (minidump_arch.h): the arm64 context as
// Breakpad's Linux client writes it (x0-x28, fp, lr, sp, pc, cpsr, and
// fpsr, fpcr and v0-v31 from the context's FP/SIMD record), and the
// processor as its architecture and ELF hardware capabilities.
#include <string.h>
#include <sys/auxv.h>

#include "core/minidump/minidump_arch.h"

namespace faultline::core {

using namespace md;

// The FP/SIMD record lies in the context itself (its __reserved chain), so
// foreign_fp changes nothing here: the copy the capture keeps holds it.
void minidump_save_regs(ArchThreadRegs* r, const ucontext_t& uc, bool /*foreign_fp*/) {
  const mcontext_t& m = uc.uc_mcontext;
  __builtin_memcpy(r->x, m.regs, sizeof r->x);
  r->sp = m.sp;
  r->pc = m.pc;
  r->pstate = m.pstate;
  const unsigned char* fp = uc_record(uc, kFpsimdMagic, kFpsimdSize);
  r->have_fp = fp != nullptr;
  if (fp) {
    __builtin_memcpy(&r->fpsr, fp + 8, 4);
    __builtin_memcpy(&r->fpcr, fp + 12, 4);
    __builtin_memcpy(r->v, fp + 16, sizeof r->v);
  }
}

uint64_t minidump_regs_sp(const ArchThreadRegs& r) {
  return r.sp;
}

uint32_t minidump_fill_context(ContextRecord* rec, const ArchThreadRegs* r) {
  ContextArm64* ctx = &rec->arm64;
  memset(ctx, 0, sizeof *ctx);
  ctx->context_flags = kContextArm64;
  if (!r) return sizeof *ctx;
  ctx->context_flags = kContextArm64Control | kContextArm64Integer;
  static_assert(sizeof r->x == 31 * sizeof ctx->iregs[0], "x0-x30");
  memcpy(ctx->iregs, r->x, sizeof r->x);  // x0-x28, fp (x29), lr (x30)
  ctx->iregs[31] = r->sp;
  ctx->pc = r->pc;
  ctx->cpsr = static_cast<uint32_t>(r->pstate);
  if (r->have_fp) {
    ctx->context_flags |= kContextArm64FloatingPoint;
    ctx->fpsr = r->fpsr;
    ctx->fpcr = r->fpcr;
    static_assert(sizeof r->v == sizeof ctx->v, "v0-v31");
    memcpy(ctx->v, r->v, sizeof ctx->v);
  }
  return sizeof *ctx;
}

void minidump_fill_cpu(SystemInfo* si) {
  si->processor_architecture = kCpuArchitectureArm64;
  // The CPU union holds, for ARM, the main ID register (unknown here: its
  // fields are in the /proc/cpuinfo stream) and the ELF hardware
  // capabilities (AT_HWCAP).
  si->vendor_id[1] = static_cast<uint32_t>(getauxval(AT_HWCAP));
}

}  // namespace faultline::core
