// Keeps the module snapshot (core/modules/module_snapshot.h) close to the link map
// in programs that load libraries long after start, as Python does with
// every extension it imports: faultline interposes dlopen and refreshes the
// snapshot before each one. So a crash finds the snapshot current, or
// missing only the modules of the last dlopen (the crash-time walk reads
// those and reuses the rest).
//
// Before, not after: dlopen finds its caller (whose RUNPATH, $ORIGIN and
// namespace apply) from its return address, so the interposer must jump to
// libc's dlopen with the caller's return address in place, never call it.
// Install-side code, never run in the signal handler.
#include "install/dlopen_hook.h"

#include <dlfcn.h>

#include "core/crash_state.h"
#include "install/module_snapshot_refresh.h"
#include "install/sigaction_hook.h"

namespace faultline::core {
namespace {

using DlopenFn = void* (*)(const char*, int);

}  // namespace
}  // namespace faultline::core

extern "C" {

// Read by the assembly below (hidden: neither name leaves the library).
faultline::core::DlopenFn g_fl_real_dlopen = nullptr;
// A dlopen ran before the install (a library's constructor, which runs
// before the preload's): what it loaded may be out of the global scope.
volatile int g_fl_dlopen_before_install = 0;

static void resolve_real_dlopen() {
  if (!g_fl_real_dlopen) {
    g_fl_real_dlopen = reinterpret_cast<faultline::core::DlopenFn>(dlsym(RTLD_NEXT, "dlopen"));
  }
}

// Runs on every dlopen, before it. Returns nothing; the stub then jumps to
// g_fl_real_dlopen, resolved here on first use.
void fl_before_dlopen() {
  resolve_real_dlopen();
  if (faultline::core::g_crash.installed) {
    faultline::core::module_snapshot_refresh(false);
    faultline::core::find_python_module();  // a program that loads Python late
  } else {
    g_fl_dlopen_before_install = 1;
  }
}

}  // extern "C"

void* faultline::install::dlopen_unhooked(const char* file, int mode) {
  resolve_real_dlopen();
  return g_fl_real_dlopen ? g_fl_real_dlopen(file, mode) : nullptr;
}

// dlopen(file, mode): save the arguments, call fl_before_dlopen with the
// stack aligned, restore them, and jump (the caller's return address stays
// on top of the stack, x86-64, or in x30, aarch64, for libc's dlopen to see).
#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".globl dlopen\n"
    ".type dlopen, @function\n"
    "dlopen:\n"
    ".cfi_startproc\n"
    "  endbr64\n"  // a no-op unless indirect-branch tracking is on
    "  push %rdi\n"
    ".cfi_adjust_cfa_offset 8\n"
    "  push %rsi\n"
    ".cfi_adjust_cfa_offset 8\n"
    "  sub $8, %rsp\n"
    ".cfi_adjust_cfa_offset 8\n"
    "  call fl_before_dlopen\n"
    "  add $8, %rsp\n"
    ".cfi_adjust_cfa_offset -8\n"
    "  pop %rsi\n"
    ".cfi_adjust_cfa_offset -8\n"
    "  pop %rdi\n"
    ".cfi_adjust_cfa_offset -8\n"
    "  jmp *g_fl_real_dlopen(%rip)\n"
    ".cfi_endproc\n"
    ".size dlopen, .-dlopen\n");
#elif defined(__aarch64__)
__asm__(
    ".text\n"
    ".globl dlopen\n"
    ".type dlopen, %function\n"
    ".p2align 2\n"
    "dlopen:\n"
    ".cfi_startproc\n"
    "  hint #34\n"  // bti c: a no-op unless branch target identification is on
    "  stp x29, x30, [sp, #-32]!\n"
    ".cfi_def_cfa_offset 32\n"
    ".cfi_offset 29, -32\n"
    ".cfi_offset 30, -24\n"
    "  mov x29, sp\n"
    "  stp x0, x1, [sp, #16]\n"
    "  bl fl_before_dlopen\n"
    "  ldp x0, x1, [sp, #16]\n"
    "  ldp x29, x30, [sp], #32\n"
    ".cfi_def_cfa_offset 0\n"
    ".cfi_restore 29\n"
    ".cfi_restore 30\n"
    "  adrp x16, :got:g_fl_real_dlopen\n"
    "  ldr x16, [x16, :got_lo12:g_fl_real_dlopen]\n"
    "  ldr x16, [x16]\n"
    "  br x16\n"
    ".cfi_endproc\n"
    ".size dlopen, .-dlopen\n");
#else
#error "dlopen_hook.cpp: no dlopen stub for this architecture"
#endif
