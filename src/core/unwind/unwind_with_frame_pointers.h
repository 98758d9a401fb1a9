// The frame-pointer backend: the classic [fp] = caller's fp, [fp+8] =
// return address chain, read through the SafeReader. What the other
// backends fall back on where they stop. Async-signal-safe.
#pragma once

#include <stdint.h>

#include "core/frames.h"

namespace faultline::core {

// Frame-pointer walk from (pc, sp, fp), appending to thread->frames.
void unwind_frame_pointers(uintptr_t fp, ThreadCapture* thread, int max_frames);

}  // namespace faultline::core
