// Native unwinding with the own CFI unwinder (unwind/cfi/engine.h), the
// frame-pointer chain where it stops; libunwind a runtime choice, loaded
// only then (FAULTLINE_UNWINDER=cfi|cfi+libunwind|libunwind).
// Async-signal-safe.
#pragma once

#include <ucontext.h>

#include "core/capture.h"
#include "core/unwind/cfi/engine.h"

namespace faultline::core {

enum class UnwinderChoice : int {
  kCfi = 0,              // the CFI unwinder; frame pointers where it stops
  kLibunwind = 1,        // libunwind; frame pointers where it stops
  kCfiThenLibunwind = 2  // the CFI unwinder; libunwind where it stops
};

// Install time: the choice, from FAULTLINE_UNWINDER ("cfi", "libunwind" or
// "cfi+libunwind"). Returns false (and keeps the default) for another value.
// The choices that need libunwind need it loaded too (libunwind_available);
// without it, the CFI unwinder is used.
bool unwinder_choose(const char* name);
UnwinderChoice unwinder_choice();

// Crash time: the modules the CFI unwinder uses in this capture (copied by
// reference: the array must live until the capture ends). Starts a new
// row-cache generation.
void unwind_cfi_set_modules(const CfiModules& mods);
const CfiModules& unwind_cfi_modules();

// Walks with the CFI unwinder into t->frames, from the interrupted context.
// Returns true when the walk reached the outermost frame (or the cap);
// false when it stopped early, with `last` set to the last frame's
// registers (that frame already recorded) for the fallback, and
// `last_exact` whether its pc is exact (else a return address).
bool unwind_cfi(const ucontext_t* uc, ThreadCapture* t, int max_frames, int max_counted,
                CfiRegs* last, bool* last_exact, CfiStatus* status);

// Bytes of stack a CFI walk needs at most (the signal handler checks the
// room it has against it).
constexpr unsigned long kCfiStackBytes = 12u << 10;

}  // namespace faultline::core
