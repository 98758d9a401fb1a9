// The crash stack: the owner of a crash or dump runs its capture here, not
// on whatever alternate stack the thread has (Python's faulthandler installs
// one of under 10 KiB). Static memory (.bss); its guard page is set by the
// first capture (not at start: a system call every process would pay).
#pragma once

namespace faultline::core {

// Readies the crash stack (once): its guard page. Called by the owner of a
// capture only (one at a time). Async-signal-safe.
bool make_crash_stack();

// Names the crash stack's memory "faultline stack" (core/base/sys.h). Install
// time.
void name_crash_stack();

// Runs fn(arg) on the crash stack, readying it first if needed (or right
// here when this thread is on it already).
// Every signal stays blocked while the stack pointer and the alternate
// stack disagree.
void run_on_crash_stack(void (*fn)(void*), void* arg);

}  // namespace faultline::core
