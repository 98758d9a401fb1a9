#include "core/capture/reraise.h"

#include <stdint.h>

#include "core/base/signals.h"
#include "core/capture/reraise_arch.h"
#include "core/crash_state.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/diagnosis.h"
#include "core/modules/elf_symbols.h"
#include "core/unwind/cfi/engine.h"

namespace faultline::core {
namespace {

bool sent_by_this_process(const Capture& c) {
  int code = c.info.si_code;
  return (code == SI_TKILL || code == SI_USER || code == SI_QUEUE) && c.info.si_pid == c.pid;
}

// The frame below the trampoline ran the faulting instruction: its pc is
// exact. An unwinder that did not flag it (libunwind flags the frame after)
// had it named from pc-1, which may be the function before; name it again.
void make_exact(Capture* c, NativeFrame* f) {
  if (f->signal_frame) return;
  f->signal_frame = true;
  if (f->module < 0 || f->module >= c->modules.count) return;
  const Module& m = c->modules.items[f->module];
  f->symbol = nullptr;
  f->symbol_offset = 0;
  symbolize_module_frames(m, &f, 1, &g_crash.arena, &c->errors);
  f->origin = &classify_native(m.path, f->symbol);
}

// The signal as delivered goes to c->reraised; the original fault takes its place.
void record(Capture* c, int frame, bool from_context, const siginfo_t& info) {
  c->reraised.present = true;
  c->reraised.signo = c->signo;
  c->reraised.info = c->info;
  c->reraised.frame = frame;
  c->reraised.from_context = from_context;
  c->signo = info.si_signo;
  c->info = info;
}

}  // namespace

bool names_fatal_fault(const siginfo_t& info) {
  for (int i = 0; i < kFatalSignalCount; ++i) {
    if (kFatalSignals[i] == info.si_signo) return find_signal_code(info.si_signo, info.si_code);
  }
  return false;
}

bool recover_reraised_fault(Capture* c) {
  if (c->kind != CaptureKind::kCrash || !c->have_uc || c->reraised.present) return false;
  if (!sent_by_this_process(*c)) return false;
  const ThreadCapture* t = crashed_thread(*c);
  if (!t) return false;
  // The innermost trampoline: the frame of the handler that raised again.
  int i = 1;
  while (i + 1 < t->nframes && !cfi_is_sigreturn(t->frames[i].pc)) ++i;
  siginfo_t info;
  if (i + 1 >= t->nframes) {
    if (!rebuild_returned_fault(*c, *t, &info)) return false;
    record(c, -1, /*from_context=*/true, info);  // no trampoline: the handler had returned
    return true;
  }
  const NativeFrame& below = t->frames[i + 1];
  bool from_context = false;
  if (!read_original_frame(t->frames[i].sp, below.pc, below.sp, c->signo, &info, &c->uc,
                           &from_context)) {
    return false;
  }
  record(c, i, from_context, info);
  make_exact(c, const_cast<NativeFrame*>(&below));
  return true;
}

}  // namespace faultline::core
