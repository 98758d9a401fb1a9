// The diagnosis: from a capture, the category ("null-deref"), the one-line
// summary and the crash signature that groups reports of one bug. Pure
// functions of the capture (plus the terminate handler's record);
// async-signal-safe.
#pragma once

#include <sys/types.h>

#include "core/base/str.h"
#include "core/capture.h"

namespace faultline::core {

// Fills c->category, c->summary and c->signature.
void diagnose(Capture* c);

// The category of a fatal signal: "null-deref", "stack-overflow", "abort",
// ... (doc/report-format.md lists them). sp and pc are the crashed
// context's, 0 when unknown.
const char* crash_category(int signo, int code, uintptr_t addr, uintptr_t sp, uintptr_t pc);

// The crashed thread's capture (nullptr for a dump), and the Python thread
// running on a native thread (nullptr if none).
const ThreadCapture* crashed_thread(const Capture& c);
const PyThread* python_thread_for(const Capture& c, pid_t tid);

// Whether si_addr of this signal is a fault address (the kernel's, for a
// memory, instruction or arithmetic fault).
bool has_fault_address(int signo, int code);

// A frame of libc's own signal-raising path (abort -> raise -> pthread_kill),
// which sits on top of every abort and says nothing about the crash.
bool is_raise_frame(const Capture& c, const NativeFrame& f);

// "module!symbol", or "module+0xOFFSET" when no symbol covers the pc.
void write_frame_name(StrBuf* b, const Capture& c, const NativeFrame& f);

}  // namespace faultline::core
