// Placeholder until the CPython walker lands: reports no Python runtime.
#include "core/python.h"

namespace faultline::core {

void python_init(const ModuleTable*) {}

void capture_python(const ModuleTable&, Arena*, PythonCapture* out, int, int, CaptureErrors*) {
  out->present = false;
}

}  // namespace faultline::core
