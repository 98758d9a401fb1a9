// The installing thread's alternate signal stack (usually the main
// thread's): a stack overflow there must still find a stack to report on.
// Other threads get theirs from thread_stacks.h. Install time only.
#pragma once

namespace faultline::core {

// Gives the calling thread faultline's alternate stack unless it has one
// big enough already, or another thread holds it; records its range in
// g_crash for the capture.
void install_altstack();

}  // namespace faultline::core
