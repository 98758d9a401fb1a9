// Native stacks of another process's stopped threads, unwound by the crash
// path's own unwinder (core/unwind/unwind.h), so that `faultline dump` by
// ptrace gives the frames a crash report would.
//
// The tracer reads a stopped thread's registers (PTRACE_GETREGSET,
// NT_PRSTATUS) into the context a signal handler would have been given; the
// unwinder then walks from it exactly as in a crash: the CFI unwinder over
// each module's .eh_frame_hdr (found as the crash path finds it, from the
// loaded image's PT_GNU_EH_FRAME), the frame-pointer chain where it stops.
// Every read of the target (program headers, unwind tables, stacks) goes
// through the SafeReader pinned to it (safe_read_remote: process_vm_readv).
#pragma once

#include <sys/types.h>
#include <ucontext.h>

#include <nlohmann/json.hpp>

#include "core/base/arena.h"
#include "core/frames.h"

namespace faultline::cli {

// Thread tid's registers, read by its tracer while it is stopped, as the
// signal context the unwinder starts from (*uc) and as the report lists
// them (*registers). False where they cannot be read (then both untouched).
bool remote_registers(pid_t tid, ucontext_t* uc, nlohmann::json* registers);

// Where a module mapped at `base` (its first mapping, holding the ELF
// header) keeps its unwind tables: reads the loaded image's program headers
// through the SafeReader. Sets *bias (ELF vaddr + bias = runtime address) and
// *eh_frame_hdr (runtime address; 0: none). False if base holds no ELF
// header that can be read.
bool remote_image(uintptr_t base, uintptr_t* bias, uintptr_t* eh_frame_hdr);

// Gives the unwinder the modules of `table` (each with eh_frame_hdr set) for
// the walks that follow; the list lives in `arena`. False if the arena is
// short (then every walk has the frame-pointer chain only).
bool remote_unwind_modules(const core::ModuleTable& table, core::Arena* arena);

// Unwinds a stopped thread from its context into t->frames (capacity
// max_frames, set by the caller): frames, frames_total, unwinder and each
// frame's module, as the crash path records them; `errors` receives why the
// unwinder fell back where it did.
void remote_unwind(const ucontext_t& uc, const core::ModuleTable& table, core::ThreadCapture* t,
                   int max_frames, core::CaptureErrors* errors);

}  // namespace faultline::cli
