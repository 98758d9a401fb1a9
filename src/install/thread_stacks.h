// Alternate signal stacks for every thread. faultline interposes
// pthread_create (preloaded or linked, the library's definition comes before
// libc's) so each new thread starts with its own guarded alternate stack; a
// stack overflow on a worker thread is then reported like one on the main
// thread. The stack is unmapped when the thread ends (a thread-specific key's
// destructor). Install-time code, not the crash path.
#pragma once

namespace faultline::core {

void set_thread_altstacks(bool on);
// Gives the calling thread an alternate stack if it has none big enough.
void ensure_thread_altstack();
// In a fork child: registers the forking thread's faultline stack (if it
// has one) under its new thread id (core/capture/altstacks.h).
void register_altstack_after_fork();

}  // namespace faultline::core
