// The architecture's part of reraise.cpp, chosen once by the build
// (reraise_x86_64.cpp or reraise_aarch64.cpp): the kernel's signal frame
// under a trampoline, and what a context tells of the fault it stopped at.
// Async-signal-safe.
#pragma once

#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

#include "core/capture.h"

namespace faultline::core {

// A siginfo naming a fatal signal with a code the report knows
// (reraise.cpp).
bool names_fatal_fault(const siginfo_t& info);

// Reads the kernel's signal frame at a trampoline's sp and checks it
// against the frame below it (below_pc, below_sp). Nothing in it is
// trusted: the stack may be corrupt, and a trampoline's frame may hold
// anything. True with the original siginfo in *info (the frame's own where
// it is plausible; else rebuilt for the delivered signal from the frame's
// context, *from_context) and the frame's general registers written over
// uc's; false leaves both alone.
bool read_original_frame(uintptr_t sp, uintptr_t below_pc, uintptr_t below_sp, int delivered,
                         siginfo_t* info, ucontext_t* uc, bool* from_context);

// No trampoline on the stack: the handler returned, and its re-raise came
// at the faulting instruction (t's first frame). True with *info the fault
// c's context describes, where the instruction at its pc makes that fault.
bool rebuild_returned_fault(const Capture& c, const ThreadCapture& t, siginfo_t* info);

}  // namespace faultline::core
