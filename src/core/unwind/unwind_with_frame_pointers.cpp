#include "core/unwind/unwind_with_frame_pointers.h"

#include "core/base/arch.h"
#include "core/base/safe_read.h"
#include "core/unwind/unwind.h"

namespace faultline::core {

void unwind_frame_pointers(uintptr_t fp, ThreadCapture* t, int max_frames) {
  // The classic chain (aarch64's frame records alike, x29 the frame
  // pointer): [fp] = caller's fp, [fp+8] = return address. Stop at
  // anything that is not a plausible, growing, aligned stack address.
  while (fp && (fp & 7) == 0 && t->frames_total < kMaxCountedFrames) {
    uintptr_t pair[2];
    if (!safe_read(pair, fp, sizeof pair)) break;
    if (pair[1] == 0) break;
    push_frame(t, max_frames, strip_return_address(pair[1]), fp + 16, false);
    if (pair[0] <= fp) break;
    fp = pair[0];
  }
}

}  // namespace faultline::core
