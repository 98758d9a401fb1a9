// The crash stack: the owner of a crash or dump runs its capture here, not
// on whatever alternate stack the thread has (Python's faulthandler installs
// one of under 10 KiB). Mapped at install with a guard page.
#pragma once

namespace faultline::core {

// Install time: maps the crash stack (once). False if it could not be mapped.
bool make_crash_stack();

// Runs fn(arg) on the crash stack (or right here when there is none, or
// when this thread is on it already). Every signal stays blocked while the
// stack pointer and the alternate stack disagree.
void run_on_crash_stack(void (*fn)(void*), void* arg);

}  // namespace faultline::core
