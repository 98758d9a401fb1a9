// The minidump beside the report (FAULTLINE_MINIDUMP): minidump.h's writer
// run over the capture, into a temporary file of the report directory that
// is published as <stem>.dmp before the JSON report, which then takes the
// same stem and names it in its "minidump" field.
//
// Async-signal-safe. It runs as the capture phase "minidump" (phase.h), so a
// fault in it, or the watchdog's first stage, costs the minidump and never
// the report; what failed is written to the capture's errors.
#pragma once

#include <ucontext.h>

#include "core/base/arena.h"
#include "core/frames.h"

namespace faultline::core {

struct Capture;

// Writes and publishes the minidump of c (c->minidump_file, c->minidump_bytes
// on success; an entry in c->errors on failure).
void write_minidump_file(Capture* c);

// Removes the temporary file of a minidump that was abandoned half-written
// (a fault, the watchdog). Idempotent. owner: called by the crash owner
// after the phase (the file is closed and removed); else by the watchdog's
// stand-in writer while the owner is stuck (only its name is removed). True
// when there was one.
bool discard_minidump_file(bool owner);

// The crash owner, after the minidump phase: removes a minidump abandoned
// half-written (discard_minidump_file), or closes one that was published
// but whose flush a fault or the watchdog cut short, and says so in place
// of the phase's "no minidump".
void end_minidump_phase(Capture* c);

// The threads phase, for a thread other than the crashing one: room for its
// registers and, while the stack copies stay within a quarter of the arena,
// for its stack window. nullptr when no minidump is written (the setting is
// off, or the capture is a live dump).
ThreadRegs* minidump_thread_room(Arena* arena);

// On the thread itself, answering the stack request: copies its registers
// and its stack window (uc: its signal context, or the context of its own
// crash) into r.
void minidump_save_thread(ThreadRegs* r, const ucontext_t* uc);

}  // namespace faultline::core
