#include "core/unwind/unwind_with_cfi.h"

#include "core/base/str.h"
#include "core/unwind/unwind.h"

namespace faultline::core {
namespace {

volatile int g_choice = static_cast<int>(UnwinderChoice::kCfi);
CfiModules g_mods = {nullptr, 0};

struct Sink {
  ThreadCapture* t;
  int max_frames;
  bool last_exact;
};

void emit(void* ctx, uintptr_t pc, uintptr_t sp, bool exact) {
  Sink* s = static_cast<Sink*>(ctx);
  push_frame(s->t, s->max_frames, pc, sp, exact);
  s->last_exact = exact;
}

}  // namespace

bool unwinder_choose(const char* name) {
  if (str_eq(name, "cfi")) {
    g_choice = static_cast<int>(UnwinderChoice::kCfi);
  } else if (str_eq(name, "libunwind")) {
    g_choice = static_cast<int>(UnwinderChoice::kLibunwind);
  } else if (str_eq(name, "cfi+libunwind")) {
    g_choice = static_cast<int>(UnwinderChoice::kCfiThenLibunwind);
  } else {
    return false;
  }
  return true;
}

UnwinderChoice unwinder_choice() {
  return static_cast<UnwinderChoice>(g_choice);
}

void unwind_cfi_set_modules(const CfiModules& mods) {
  g_mods = mods;
  cfi_new_generation();
}

const CfiModules& unwind_cfi_modules() {
  return g_mods;
}

bool unwind_cfi(const ucontext_t* uc, ThreadCapture* t, int max_frames, int max_counted,
                CfiRegs* last, bool* last_exact, CfiStatus* status) {
  CfiRegs regs;
  cfi_regs_from_ucontext(uc, &regs);
  Sink sink = {t, max_frames, true};
  cfi_walk(g_mods, regs, true, emit, &sink, max_counted - t->frames_total, status, last);
  if (*status == CfiStatus::kEnd || t->frames_total >= max_counted) return true;
  *last_exact = sink.last_exact;
  return false;
}

}  // namespace faultline::core
