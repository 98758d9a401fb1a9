#include "core/unwind/cfi/engine.h"

#include <stddef.h>

#include "core/base/safe_read.h"
#include "core/unwind/cfi/cfi_arch.h"
#include "core/unwind/cfi/expr.h"
#include "core/unwind/cfi/stream.h"
#include "core/unwind/cfi/table.h"

namespace faultline::core {
namespace {

using namespace cfi;

CfiStatus apply_row(const Row& row, CfiRegs* regs, StackWindow* stack, bool* exact) {
  uintptr_t cfa;
  if (row.cfa.kind == kRegister) {
    int r = static_cast<int>(row.cfa.value);
    if (!(regs->valid & cfi_bit(r))) return CfiStatus::kBadCfi;
    cfa = regs->r[r] + static_cast<uintptr_t>(row.cfa_off);
  } else if (!eval_expr(static_cast<uintptr_t>(row.cfa.value), row.cfa.len, *regs, false, 0,
                        &cfa)) {
    return CfiStatus::kBadCfi;
  }
  CfiRegs next;
  next.valid = 0;
  for (int i = 0; i < kCfiNumRegs; ++i) {
    const Rule& rule = row.regs[i];
    uintptr_t v = 0, addr = 0;
    bool ok = true;
    switch (rule.kind) {
      case kUnset:
      case kSame:
        if (i == kCfiRa && kCfiRa == kCfiRip) {
          ok = false;  // a return address must have a rule (x86-64; aarch64's is in x30)
        } else {
          v = regs->r[i];
          ok = regs->valid & cfi_bit(i);
        }
        break;
      case kUndefined:
        ok = false;
        break;
      case kOffset:
        ok = stack->read(cfa + static_cast<uintptr_t>(rule.value), &v);
        break;
      case kValOffset:
        v = cfa + static_cast<uintptr_t>(rule.value);
        break;
      case kRegister:
        v = regs->r[rule.value];
        ok = regs->valid & cfi_bit(static_cast<int>(rule.value));
        break;
      case kExpr:
        ok = eval_expr(static_cast<uintptr_t>(rule.value), rule.len, *regs, true, cfa, &addr) &&
             safe_read_obj(&v, addr);
        break;
      case kValExpr:
        ok = eval_expr(static_cast<uintptr_t>(rule.value), rule.len, *regs, true, cfa, &v);
        break;
    }
    if (ok) {
      next.r[i] = v;
      next.valid |= cfi_bit(i);
    } else {
      next.r[i] = 0;
      if (i == kCfiRa && (rule.kind == kOffset || rule.kind == kExpr))
        return CfiStatus::kUnreadable;
    }
  }
  if (row.regs[kCfiRsp].kind == kUnset) {
    next.r[kCfiRsp] = cfa;  // the CFA is the caller's stack pointer
    next.valid |= cfi_bit(kCfiRsp);
  }
  // The caller's pc: its return-address column's value (aarch64: x30), a
  // return address without its pointer-authentication code.
  next.r[kCfiRip] = strip_return_address(next.r[kCfiRa]);
  next.valid =
      (next.valid & ~cfi_bit(kCfiRip)) | (next.valid & cfi_bit(kCfiRa) ? cfi_bit(kCfiRip) : 0);
  if (!(next.valid & cfi_bit(kCfiRip)) || next.r[kCfiRip] == 0) {
    *regs = next;
    return CfiStatus::kEnd;
  }
  *regs = next;
  *exact = row.signal;
  return CfiStatus::kStepped;
}

struct WalkState {
  StackWindow stack;
  CieCache cies;
};

CfiStatus step(const CfiModules& mods, CfiRegs* regs, bool* exact, WalkState* w) {
  if (!(regs->valid & cfi_bit(kCfiRip))) return CfiStatus::kEnd;
  uintptr_t pc = regs->r[kCfiRip];
  uintptr_t lookup = *exact ? pc : pc - 1;
  Row row;
  if (row_cache_get(lookup, &row)) return apply_row(row, regs, &w->stack, exact);
  int m = cfi_find_module(mods, lookup);
  CfiStatus st = CfiStatus::kNoModule;
  if (m >= 0) {
    st = mods.items[m].eh_frame_hdr ? find_row(mods.items[m], lookup, &row, &w->cies)
                                    : CfiStatus::kNoTable;
  }
  if (st != CfiStatus::kStepped) {
    // A signal trampoline without (usable) tables.
    if (arch_is_sigreturn(pc)) return arch_step_sigreturn(regs, exact);
    return st;
  }
  if (!row.has_expr) row_cache_put(lookup, row);
  return apply_row(row, regs, &w->stack, exact);
}

}  // namespace

bool cfi_is_sigreturn(uintptr_t pc) {
  return arch_is_sigreturn(pc);
}

bool cfi_follows_call(uintptr_t ret) {
  return arch_follows_call(ret);
}

const char* cfi_status_name(CfiStatus s) {
  switch (s) {
    case CfiStatus::kStepped:
      return "stepped";
    case CfiStatus::kEnd:
      return "end of stack";
    case CfiStatus::kNoModule:
      return "pc is in no module";
    case CfiStatus::kNoTable:
      return "module has no usable .eh_frame_hdr";
    case CfiStatus::kNoFde:
      return "no FDE covers pc";
    case CfiStatus::kBadCfi:
      return "unsupported or malformed call-frame information";
    case CfiStatus::kUnreadable:
      return "unwind table or stack not readable";
  }
  return "?";
}

void cfi_regs_from_ucontext(const ucontext_t* uc, CfiRegs* regs) {
  arch_regs_from_ucontext(*uc, regs);
}

void cfi_regs_to_ucontext(const CfiRegs& regs, ucontext_t* uc) {
  arch_regs_to_ucontext(regs, uc);
}

int cfi_find_module(const CfiModules& mods, uintptr_t pc) {
  int lo = 0, hi = mods.count;  // first module with lo > pc
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (mods.items[mid].lo <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return -1;
  const CfiModule& m = mods.items[lo - 1];
  return pc < m.hi ? lo - 1 : -1;
}

CfiStatus cfi_lookup(const CfiModules& mods, uintptr_t pc) {
  int m = cfi_find_module(mods, pc);
  if (m < 0) return CfiStatus::kNoModule;
  if (!mods.items[m].eh_frame_hdr) return CfiStatus::kNoTable;
  Row row;
  CieCache cies = {};
  return find_row(mods.items[m], pc, &row, &cies);
}

CfiStatus cfi_step(const CfiModules& mods, CfiRegs* regs, bool* exact) {
  WalkState w{};
  return step(mods, regs, exact, &w);
}

void cfi_new_generation() {
  row_cache_new_generation();
}

int cfi_walk(const CfiModules& mods, const CfiRegs& start, bool exact, CfiEmit emit, void* ctx,
             int max_total, CfiStatus* status, CfiRegs* last) {
  WalkState w{};
  CfiRegs regs = start;
  int total = 0;
  CfiStatus st = CfiStatus::kEnd;
  while (total < max_total) {
    if (!(regs.valid & cfi_bit(kCfiRip)) || (regs.r[kCfiRip] == 0 && total > 0)) {
      st = CfiStatus::kEnd;
      break;
    }
    emit(ctx, regs.r[kCfiRip], regs.r[kCfiRsp], exact);
    ++total;
    *last = regs;
    uintptr_t old_pc = regs.r[kCfiRip], old_sp = regs.r[kCfiRsp];
    st = step(mods, &regs, &exact, &w);
    if (st == CfiStatus::kStepped && total == 1) {
      // nothing special: the first frame had tables
    } else if (st != CfiStatus::kStepped && total == 1 && st != CfiStatus::kEnd &&
               st != CfiStatus::kUnreadable) {
      // The first pc has no unwind information: a call through a bad
      // pointer (null, garbage, freed JIT code) or a function without
      // tables, stopped at its first instruction. The return address is on
      // top of the stack (aarch64: in x30). Only if it looks like one (in a module, after a
      // call): a function without tables stopped past its prologue has a
      // saved register there, and the fallback unwinder does better.
      if (!arch_step_without_tables(mods, &regs, &w.stack)) break;
      exact = false;
      st = CfiStatus::kStepped;
    }
    if (st != CfiStatus::kStepped) break;
    if (regs.r[kCfiRip] == old_pc && regs.r[kCfiRsp] == old_sp) {
      st = CfiStatus::kBadCfi;  // no progress: a loop
      break;
    }
  }
  *status = st;
  return total;
}

}  // namespace faultline::core
