// Placeholder until the CPython walker lands: reports no Python runtime.
#include "core/python.h"

namespace faultline::core {

void python_init(const ModuleTable*) {}

void capture_python(const ModuleTable&, Arena*, PythonCapture* out, int, int, CaptureErrors*) {
  out->present = false;
}

int interleave_frames(const ThreadCapture&, const PyThread&, const ModuleTable&, FrameRef*, int) {
  return -1;
}

}  // namespace faultline::core
