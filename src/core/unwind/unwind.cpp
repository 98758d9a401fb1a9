#include "core/unwind/unwind.h"

#include "core/base/arch.h"
#include "core/base/safe_read.h"
#include "core/unwind/unwind_with_cfi.h"
#include "core/unwind/unwind_with_frame_pointers.h"
#include "core/unwind/unwind_with_libunwind.h"

namespace faultline::core {

void push_frame(ThreadCapture* t, int max_frames, uintptr_t pc, uintptr_t sp, bool signal_frame) {
  if (t->nframes < max_frames) {
    NativeFrame& f = t->frames[t->nframes++];
    f.pc = pc;
    f.sp = sp;
    f.module = -1;
    f.symbol = nullptr;
    f.signal_frame = signal_frame;
  }
  ++t->frames_total;
}

bool unwind_uses_cfi() {
  if (unwind_cfi_modules().count == 0) return false;
  return unwinder_choice() != UnwinderChoice::kLibunwind || !libunwind_available();
}

bool stack_has_room(uintptr_t bytes, const stack_t* known) {
  stack_t ss;
  if (known) {
    ss = *known;
  } else if (sigaltstack(nullptr, &ss) != 0) {
    return false;
  }
  char here;
  uintptr_t sp = reinterpret_cast<uintptr_t>(&here);
  // On it when sp lies inside it (a delivered uc_stack's flags are not
  // about where this handler runs).
  return !on_signal_stack(ss, sp) || sp - reinterpret_cast<uintptr_t>(ss.ss_sp) >= bytes;
}

void unwind_from_context(const ucontext_t* uc, const ModuleTable& modules, ThreadCapture* t,
                         int max_frames, CaptureErrors* errors, const stack_t* running_on) {
  t->nframes = 0;
  t->frames_total = 0;
  if (unwind_uses_cfi()) {
    t->unwinder = Unwinder::kCfi;
    CfiRegs last;
    bool last_exact = true;
    CfiStatus st;
    if (unwind_cfi(uc, t, max_frames, kMaxCountedFrames, &last, &last_exact, &st)) {
      t->captured = true;
      return;
    }
    bool want_libunwind =
        unwinder_choice() == UnwinderChoice::kCfiThenLibunwind && libunwind_available();
    if (want_libunwind && stack_has_room(40u << 10, running_on)) {
      t->unwinder = Unwinder::kCfiThenLibunwind;
      errors->add("unwind: the CFI unwinder stopped early; libunwind went on from there");
      unwind_with_libunwind(uc, &last, last_exact, modules, t, max_frames, errors);
    } else {
      int before = t->frames_total;
      if (last.valid & cfi_bit(kCfiRbp)) unwind_frame_pointers(last.r[kCfiRbp], t, max_frames);
      bool went_on = t->frames_total > before;
      if (went_on) t->unwinder = Unwinder::kCfiThenFp;
      if (!want_libunwind) {
        errors->add(went_on ? "unwind: the CFI unwinder stopped early; continued with the "
                              "frame-pointer chain"
                            : "unwind: the CFI unwinder stopped early and no frame-pointer "
                              "chain was found");
      } else {
        errors->add(went_on ? "unwind: the CFI unwinder stopped early; continued with the "
                              "frame-pointer chain (no room for libunwind on this signal stack)"
                            : "unwind: the CFI unwinder stopped early (no room for libunwind on "
                              "this signal stack)");
      }
    }
    t->captured = true;
    return;
  }
  if (libunwind_available()) {
    t->unwinder = Unwinder::kLibunwind;
    unwind_with_libunwind(uc, nullptr, true, modules, t, max_frames, errors);
  } else {
    // No unwind tables to use (the module list could not be read) and no
    // libunwind: the faulting pc, then the frame-pointer chain.
    t->unwinder = Unwinder::kFramePointer;
    push_frame(t, max_frames, uc_pc(*uc), uc_sp(*uc), true);
    unwind_frame_pointers(uc_fp(*uc), t, max_frames);
    errors->add("unwind: no unwind tables and no libunwind; frame-pointer chain only");
  }
  t->captured = true;
}

}  // namespace faultline::core
