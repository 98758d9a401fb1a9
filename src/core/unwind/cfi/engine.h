// faultline's own DWARF CFI unwinder for x86-64 and aarch64, over
// .eh_frame_hdr (the architecture's part: cfi_arch.h).
//
// One step: find the module that holds the pc (a sorted table, binary
// search), find the FDE in the module's .eh_frame_hdr search table (binary
// search), run the CIE's and FDE's call-frame program up to the pc, compute
// the CFA and the caller's registers. Covers what compilers emit on x86-64:
// DW_CFA_def_cfa*, offset*, restore*, remember/restore_state, advance_loc*,
// register, same_value, undefined, val_offset*, and DWARF expressions of the
// small stack-machine kind the PLT and hand-written assembly use. Signal
// trampolines (an FDE whose CIE carries the 'S' augmentation, or the
// rt_sigreturn instruction sequence) are stepped through the ucontext on the
// stack.
//
// No locks, no loader calls, no heap: every read of memory the unwinder does
// not own goes through the SafeReader. Rows already computed are kept in a
// lock-free cache (per capture generation), so a deep recursion or many
// threads with the same code cost one table lookup per distinct pc.
// Async-signal-safe.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "core/base/arch.h"

namespace faultline::core {

// One loaded module, as the unwinder needs it.
struct CfiModule {
  uintptr_t lo;            // lowest mapped address (runtime)
  uintptr_t hi;            // one past the highest
  uintptr_t eh_frame_hdr;  // runtime address of .eh_frame_hdr; 0: none
  // Optional, made outside the signal path: every kCfiIndexStride-th start
  // address of the search table (relative to eh_frame_hdr, as the table
  // has them), so the search at crash time reads one stretch of the table
  // instead of probing it. table: the search table's address; count: its
  // entries.
  const int32_t* index;
  uint32_t index_len;
  uint32_t count;
  uintptr_t table;
};

constexpr uint32_t kCfiIndexStride = 64;

// The modules, sorted by lo, without overlaps.
struct CfiModules {
  const CfiModule* items;
  int count;
};

// The architecture's DWARF registers (core/base/arch.h), named as on
// x86-64: kCfiRsp the stack pointer, kCfiRbp the frame pointer (x29 on
// aarch64), kCfiRip the pc; kCfiRa the return-address column (rip on
// x86-64, x30 on aarch64).
enum : int {
  kCfiRsp = kArchCfiSp,
  kCfiRbp = kArchCfiFp,
  kCfiRip = kArchCfiPc,
  kCfiRa = kArchCfiRa,
  kCfiNumRegs = kArchCfiNumRegs
};

constexpr uint64_t cfi_bit(int reg) {
  return uint64_t{1} << reg;
}

struct CfiRegs {
  uintptr_t r[kCfiNumRegs];
  uint64_t valid;  // bit i: r[i] is known
};

enum class CfiStatus : uint8_t {
  kStepped,     // regs now describe the caller
  kEnd,         // the outermost frame (return address undefined or 0)
  kNoModule,    // pc is in no module
  kNoTable,     // the module has no .eh_frame_hdr (or one we cannot read)
  kNoFde,       // no FDE covers pc
  kBadCfi,      // a malformed or unsupported CIE/FDE or expression
  kUnreadable,  // a read of the table or the stack failed
};

const char* cfi_status_name(CfiStatus s);

// Registers of an interrupted context, and back (registers not known are
// written as 0).
void cfi_regs_from_ucontext(const ucontext_t* uc, CfiRegs* regs);
void cfi_regs_to_ucontext(const CfiRegs& regs, ucontext_t* uc);

// Whether the bytes before ret are a call instruction (ret is a plausible
// return address). Reads through the SafeReader.
bool cfi_follows_call(uintptr_t ret);

// Whether pc is the rt_sigreturn trampoline (x86-64: mov $15,%rax;
// syscall; aarch64: mov x8,#139; svc #0), where a signal handler returns
// to: sp there is the kernel's signal frame. Reads through the SafeReader.
bool cfi_is_sigreturn(uintptr_t pc);

// Index of the module holding pc, or -1.
int cfi_find_module(const CfiModules& mods, uintptr_t pc);

// Whether pc (an exact pc) has unwind information: kStepped if an FDE
// covers it, else why not (kNoModule, kNoTable, kNoFde, kUnreadable).
CfiStatus cfi_lookup(const CfiModules& mods, uintptr_t pc);

// One step. `exact` (in and out): the pc is the interrupted instruction (the
// first frame, and the frame a signal interrupted), not a return address.
CfiStatus cfi_step(const CfiModules& mods, CfiRegs* regs, bool* exact);

// A full walk from `start`. Each frame is handed to emit (pc, sp, and
// whether pc is exact); returns how many frames were seen, at most
// max_total. `status` receives why the walk ended, `last` the registers of
// the last frame emitted (where a fallback unwinder can go on). A first pc
// without unwind information (a call through a bad pointer, a function
// without tables stopped at its first instruction) is stepped with the
// return address on top of the stack.
using CfiEmit = void (*)(void* ctx, uintptr_t pc, uintptr_t sp, bool exact);
int cfi_walk(const CfiModules& mods, const CfiRegs& start, bool exact, CfiEmit emit, void* ctx,
             int max_total, CfiStatus* status, CfiRegs* last);

// Starts a new capture: rows cached by an earlier one are not trusted (the
// modules may have changed). Async-signal-safe.
void cfi_new_generation();

}  // namespace faultline::core
