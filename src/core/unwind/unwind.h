// Native unwinding of the crashing thread from the signal's ucontext.
//
// The CFI unwinder (unwind/unwind_with_cfi.h) by default; libunwind when chosen with
// FAULTLINE_UNWINDER (and loaded). Either starts from the interrupted
// context (not from inside the handler), so frame 0 is the faulting
// instruction with its exact pc and the handler's own frames never appear.
// Where the unwinder stops with an error, or the pc is not code (a call
// through a bad function pointer), the walk continues with a frame-pointer
// chain read through the SafeReader (or, under "cfi+libunwind", with
// libunwind); the report says so.
//
// Each backend has a file of its own: unwind_with_cfi, unwind_with_libunwind,
// unwind_with_frame_pointers. Async-signal-safe with the libunwind caveat
// in unwind_with_libunwind.cpp.
#pragma once

#include <ucontext.h>

#include "core/frames.h"
#include "core/modules/modules.h"

namespace faultline::core {

// Beyond this many frames we stop counting (a runaway recursion of a million
// frames is reported as "at least 10000").
constexpr int kMaxCountedFrames = 10000;

// Whether a capture unwinds with the CFI unwinder first: it has the
// modules' tables, and libunwind is not the choice (or not loaded).
bool unwind_uses_cfi();

// True when sp lies on the signal stack ss (one that is enabled).
inline bool on_signal_stack(const stack_t& ss, uintptr_t sp) {
  uintptr_t lo = reinterpret_cast<uintptr_t>(ss.ss_sp);
  return (ss.ss_flags & SS_DISABLE) == 0 && sp >= lo && sp - lo < ss.ss_size;
}

// True unless this thread runs on a signal stack with less than `bytes`
// left below it. `known`: the signal stack when the caller knows it (a
// delivered uc_stack), else nullptr: the one sigaltstack reports.
bool stack_has_room(uintptr_t bytes, const stack_t* known);

// Fills thread->frames (capacity max_frames, allocated by the caller),
// nframes, frames_total and unwinder. `phase_error` receives a reason when
// the unwinder had to fall back. `running_on`: the signal stack the caller
// runs on when it knows it (a signal's delivered uc_stack: inside a handler
// sigaltstack says "disabled" for an SS_AUTODISARM one); else nullptr, and
// sigaltstack says.
void unwind_from_context(const ucontext_t* uc, const ModuleTable& modules, ThreadCapture* thread,
                         int max_frames, CaptureErrors* errors,
                         const stack_t* running_on = nullptr);

// Appends one frame (kept while fewer than max_frames are kept; always
// counted in frames_total). Both unwinders record frames through it.
void push_frame(ThreadCapture* t, int max_frames, uintptr_t pc, uintptr_t sp, bool signal_frame);

}  // namespace faultline::core
