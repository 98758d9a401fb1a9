// The architecture's part of the minidump, chosen once by the build
// (minidump_arch_x86_64.cpp or minidump_arch_aarch64.cpp): a thread's
// registers taken from its signal context, its context record, and the
// processor fields of the system info. The writer (minidump.cpp) and its
// caller (minidump_file.cpp) are the same on every architecture.
//
// Async-signal-safe.
#pragma once

#include <stdint.h>
#include <ucontext.h>

#include "core/base/arch.h"
#include "core/minidump/minidump_format.h"

namespace faultline::core {

// Copies the registers of the signal context uc into r. foreign_fp: the
// floating-point state the context points to may be gone or not this
// thread's (the crash context as the capture keeps it): it is read through
// the SafeReader.
void minidump_save_regs(ArchThreadRegs* r, const ucontext_t& uc, bool foreign_fp);

// The stack pointer in r: where the thread's stack window starts.
uint64_t minidump_regs_sp(const ArchThreadRegs& r);

// A thread context record of the architecture.
union ContextRecord {
  md::ContextAmd64 amd64;
  md::ContextArm64 arm64;
};

// Fills ctx from r (nullptr: the registers are unknown, the record says
// so by its flags). Returns the record's size in bytes.
uint32_t minidump_fill_context(ContextRecord* ctx, const ArchThreadRegs* r);

// The processor's fields of the system info: its architecture, and what
// the architecture tells of the CPU.
void minidump_fill_cpu(md::SystemInfo* si);

}  // namespace faultline::core
