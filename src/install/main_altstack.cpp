#include "install/main_altstack.h"

#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/sys.h"
#include "core/crash_state.h"

namespace faultline::core {
namespace {

// 2 MiB alternate stack, reserved, not committed (pages never touched cost
// nothing): faultline's handler keeps its big buffers in static memory, but
// libunwind and the ELF reader still use tens of KiB, and a program's own
// crash handler that faultline runs here may want more (redis's memory
// test keeps a 1 MiB buffer on its stack; on a smaller stack it wrote
// past the guard page into the mapping below).
constexpr size_t kAltStackBytes = 2u << 20;
void* g_altstack = nullptr;
// Set once the kernel refused to name a mapping: memfds from then on.
// Threads start at once: read and set atomically.
int g_names_refused = 0;

void* map_memfd_stack(size_t len, int flags) {
  // A memfd's size counts against RLIMIT_FSIZE: past it, ftruncate would
  // send SIGXFSZ and end the process. An unnamed stack then.
  struct rlimit fsize;
  if (getrlimit(RLIMIT_FSIZE, &fsize) != 0 ||
      (fsize.rlim_cur != RLIM_INFINITY && fsize.rlim_cur < len)) {
    return MAP_FAILED;
  }
  int fd = static_cast<int>(syscall(SYS_memfd_create, "faultline stack", MFD_CLOEXEC));
  if (fd < 0) return MAP_FAILED;
  void* p = ftruncate(fd, static_cast<off_t>(len)) == 0
                ? mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | flags, fd, 0)
                : MAP_FAILED;
  close(fd);
  return p;
}

}  // namespace

void* map_stack(size_t len, int flags, bool memfd) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bool refused = __atomic_load_n(&g_names_refused, __ATOMIC_RELAXED);
  void* p = refused && memfd ? map_memfd_stack(len, flags) : MAP_FAILED;
  if (p == MAP_FAILED) {
    p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (p == MAP_FAILED) return p;
    if (!refused && !name_mapping(p, len, "faultline stack")) {
      __atomic_store_n(&g_names_refused, 1, __ATOMIC_RELAXED);
      void* named = memfd ? map_memfd_stack(len, flags) : MAP_FAILED;
      if (named != MAP_FAILED) {
        munmap(p, len);
        p = named;
      }
    }
  }
  mprotect(p, page, PROT_NONE);  // guard page below the stack
  return p;
}

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
    void* p = map_stack(kAltStackBytes + page, MAP_STACK | MAP_NORESERVE, /*memfd=*/true);
    if (p == MAP_FAILED) return;
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
