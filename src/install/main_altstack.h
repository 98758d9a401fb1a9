// The installing thread's alternate signal stack (usually the main
// thread's): a stack overflow there must still find a stack to report on.
// Other threads get theirs from thread_stacks.h. Install time only.
#pragma once

#include <stddef.h>

namespace faultline::core {

// Gives the calling thread faultline's alternate stack unless it has one
// big enough already, or another thread holds it; records its range in
// g_crash for the capture.
void install_altstack();

// Maps len bytes of read-write memory for an alternate signal stack, its
// first page a guard page, that /proc/PID/maps says is a stack: named
// [anon:faultline stack] where the kernel names anonymous mappings, else a
// private mapping of a memfd named "faultline stack" (a program's crash
// handler runs on it, and memory scanners run from one, such as redis's
// memory test, skip the lines that say "stack"); `memfd` false: no memfd,
// an unnamed mapping there (a thread's start must not make a descriptor).
// MAP_FAILED if none.
void* map_stack(size_t len, int flags, bool memfd);

}  // namespace faultline::core
