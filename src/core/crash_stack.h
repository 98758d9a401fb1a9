// The crash stack: the owner of a crash or dump runs its capture here, not
// on whatever alternate stack the thread has (Python's faulthandler installs
// one of under 10 KiB). Mapped, with a guard page, by the first capture
// (not at start: two system calls every process would pay).
#pragma once

namespace faultline::core {

// Maps the crash stack (once). False if it could not be mapped. Called by
// the owner of a capture only (one at a time). Async-signal-safe.
bool make_crash_stack();

// Runs fn(arg) on the crash stack, mapping it first if needed (or right
// here when it cannot be mapped, or when this thread is on it already).
// Every signal stays blocked while the stack pointer and the alternate
// stack disagree.
void run_on_crash_stack(void (*fn)(void*), void* arg);

}  // namespace faultline::core
