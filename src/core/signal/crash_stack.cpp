#include "core/signal/crash_stack.h"

#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>

#include "core/base/arch.h"
#include "core/base/sys.h"
#include "core/handler_state.h"

namespace faultline::core {
namespace {

constexpr size_t kCrashStackBytes = 512u << 10;
constexpr size_t kPage = 4096;

// In .bss, not mapped at the first capture: the crashes that most need the
// crash stack (out of memory: RLIMIT_AS, vm.max_map_count, overcommit off)
// are the ones where a mapping made then would fail, and a zero page costs
// nothing until the stack is used. Not at install either: two system calls
// every process would pay.
alignas(kPage) char g_crash_stack_area[kPage + kCrashStackBytes];

void trampoline_body(void (*fn)(void*), void* arg) {
  // Off the alternate stack now: disable it while we run, so a fault in the
  // capture is delivered here on the crash stack instead of at the top of
  // the alternate stack, where it would overwrite the frame we return to.
  stack_t off = {};
  off.ss_flags = SS_DISABLE;
  stack_t old = {};
  bool swapped = sigaltstack(&off, &old) == 0;
  sigprocmask(SIG_SETMASK, &g_handler.switch_mask, nullptr);
  fn(arg);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  if (swapped) sigaltstack(&old, nullptr);
}

}  // namespace

void run_on_crash_stack(void (*fn)(void*), void* arg) {
  if (!g_handler.crash_stack) make_crash_stack();
  char* base = g_handler.crash_stack;
  uintptr_t sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  uintptr_t lo = reinterpret_cast<uintptr_t>(base);
  if (!base || (sp >= lo && sp < lo + kCrashStackBytes)) {
    fn(arg);
    return;
  }
  char* top = base + kCrashStackBytes;  // 16-byte aligned (page aligned)
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &g_handler.switch_mask);
  call_on_stack(top, trampoline_body, fn, arg);
  sigprocmask(SIG_SETMASK, &g_handler.switch_mask, nullptr);
}

void name_crash_stack() {
  name_mapping(g_crash_stack_area, sizeof g_crash_stack_area, "faultline stack");
}

bool make_crash_stack() {
  if (g_handler.crash_stack) return true;
  // The first page guards the stack below it. If mprotect fails (out of
  // memory to split the mapping), the stack goes without a guard page.
  mprotect(g_crash_stack_area, kPage, PROT_NONE);
  g_handler.crash_stack = g_crash_stack_area + kPage;
  return true;
}

}  // namespace faultline::core
