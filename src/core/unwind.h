// Native unwinding of the crashing thread from the signal's ucontext.
//
// libunwind is initialised from the interrupted context (not from inside the
// handler), so frame 0 is the faulting instruction with its exact pc and the
// handler's own frames never appear. If libunwind stops with an error, or the
// pc is not code (a call through a bad function pointer), the walk continues
// with a frame-pointer chain read through the SafeReader; the report says so.
//
// Async-signal-safe with the libunwind caveat in unwind.cpp.
#pragma once

#include <ucontext.h>

#include "core/frames.h"
#include "core/modules.h"

namespace faultline::core {

// Install-time: set libunwind's caching policy for use in a signal handler.
// per_thread_cache: libunwind's per-thread cache (its own TLS) is safe to
// touch in a handler, i.e. that TLS is static; else no cache is used.
void unwind_init(bool per_thread_cache);

// Fills thread->frames (capacity max_frames, allocated by the caller),
// nframes, frames_total and unwinder. `phase_error` receives a reason when
// the unwinder had to fall back.
void unwind_from_context(const ucontext_t* uc, const ModuleTable& modules, ThreadCapture* thread,
                         int max_frames, CaptureErrors* errors);

// Appends one frame (kept while fewer than max_frames are kept; always
// counted in frames_total). Both unwinders record frames through it.
void push_frame(ThreadCapture* t, int max_frames, uintptr_t pc, uintptr_t sp, bool signal_frame);

// Frame-pointer walk from (pc, sp, fp), appending to thread->frames.
void unwind_frame_pointers(uintptr_t fp, ThreadCapture* thread, int max_frames);

}  // namespace faultline::core
