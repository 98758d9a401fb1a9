#include "install/main_altstack.h"

#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/base/sys.h"
#include "core/crash_state.h"

namespace faultline::core {
namespace {

// 256 KiB alternate stack: the handler keeps its big buffers in static
// memory, but libunwind and the ELF reader still use tens of KiB.
constexpr size_t kAltStackBytes = 256u << 10;
void* g_altstack = nullptr;

}  // namespace

void install_altstack() {
  stack_t current;
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE) &&
      current.ss_size >= kAltStackBytes) {
    return;  // someone already gave this thread a big enough one
  }
  // The install's stack is one thread's (usually the main thread's): a
  // second install from another thread keeps that thread's own stack (a
  // shared signal stack would be overwritten by two handlers at once).
  pid_t holder = __atomic_load_n(&g_crash.altstack_tid, __ATOMIC_ACQUIRE);
  if (g_altstack && holder != 0 && holder != sys_gettid()) return;
  if (!g_altstack) {
    // One guard page below the stack catches an overflow of the handler itself.
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, kAltStackBytes + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return;
    mprotect(p, page, PROT_NONE);
    name_mapping(p, kAltStackBytes + page, "faultline stack");
    g_altstack = static_cast<char*>(p) + page;
  }
  stack_t ss = {};
  ss.ss_sp = g_altstack;
  ss.ss_size = kAltStackBytes;
  if (sigaltstack(&ss, nullptr) == 0) {
    // hi = 0 first: a concurrent capture never mixes two ranges (see
    // altstack_prefault).
    uintptr_t lo = reinterpret_cast<uintptr_t>(ss.ss_sp);
    __atomic_store_n(&g_crash.altstack_hi, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&g_crash.altstack_tid, sys_gettid(), __ATOMIC_RELEASE);
    __atomic_store_n(&g_crash.altstack_lo, lo, __ATOMIC_RELEASE);
    __atomic_store_n(&g_crash.altstack_hi, lo + ss.ss_size, __ATOMIC_RELEASE);
  }
}

}  // namespace faultline::core
