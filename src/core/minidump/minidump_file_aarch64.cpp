// aarch64 writes no minidump yet (the writer's thread context is x86-64's
// CONTEXT_AMD64; doc/aarch64.md): FAULTLINE_MINIDUMP=1 says so in the
// report's errors, and the threads keep no registers for it.
#include "core/capture.h"
#include "core/minidump/minidump_file.h"

namespace faultline::core {

void write_minidump_file(Capture* c) {
  c->errors.add("minidump: not written on aarch64 (no arm64 thread context yet)");
}

bool discard_minidump_file(bool) {
  return false;
}

void end_minidump_phase(Capture*) {}

ThreadRegs* minidump_thread_room(Arena*) {
  return nullptr;
}

void minidump_save_thread(ThreadRegs*, const ucontext_t*) {}

}  // namespace faultline::core
