// aarch64 has no counterpart yet of reraise.cpp's recovery of a fault that
// the program's handler raised again (it decodes x86-64 trap numbers and
// instructions): the report names the re-raised signal (doc/aarch64.md).
#include "core/capture/reraise.h"

namespace faultline::core {

bool recover_reraised_fault(Capture*) {
  return false;
}

}  // namespace faultline::core
