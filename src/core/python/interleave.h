// The merge of a thread's native and Python frames in call order, for the
// report writers. Async-signal-safe.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "core/base/arena.h"
#include "core/frames.h"

namespace faultline::core {

// One entry of a thread's merged stack: a native frame or a Python frame.
struct FrameRef {
  bool python;
  int index;  // into ThreadCapture::frames or PyThread::frames
};

// Merges a thread's native and Python frames in call order, innermost first:
// each native frame of the interpreter's eval loop is preceded by the Python
// frames it was running. Returns the number of entries written to out (at
// most cap), or -1 when the merge cannot be proven (then the report keeps
// both lists and says they were not merged).
int interleave_frames(const ThreadCapture& native, const PyThread& py, const ModuleTable& modules,
                      FrameRef* out, int cap);

}  // namespace faultline::core
