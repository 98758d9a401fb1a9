// The architecture's side of the crash path, chosen once here: the
// registers of a signal context (pc, sp, frame pointer, the report's
// register names), what the context says about a page fault, and the
// signal frame's size. Everything else reads registers through these.
#pragma once

#include <stdint.h>

namespace faultline::core {

// One register as the report names it.
struct ArchReg {
  char name[8];
  uint64_t value;
};

// What a signal context tells of a page fault (uc_page_fault).
struct PageFault {
  bool known;       // the context is a user page fault's
  bool protection;  // the page was mapped (its protection refused the access)
  bool write;
  bool fetch;
};

}  // namespace faultline::core

#if defined(__x86_64__)
#include "core/base/arch_x86_64.h"
#elif defined(__aarch64__)
#include "core/base/arch_aarch64.h"
#else
#error "faultline's crash path supports x86-64 and aarch64"
#endif
