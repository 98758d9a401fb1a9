#include "core/base/safe_read.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/base/fd_identity.h"
#include "core/base/start_text.h"
#include "core/base/sys.h"
#include "core/base/thread_state.h"

namespace faultline::core {
namespace {

// process_vm_readv until the first denial switches to the pipe for good.
volatile int g_method = static_cast<int>(SafeReadMethod::kVmReadv);
// Made by the first pipe read (most processes never need it: a pipe and two
// fstat at every start cost ~35 us on a small VM), under g_pipe_busy.
int g_pipe[2] = {-1, -1};
FdIdentity g_pipe_id[2];
// One pipe is shared: a reader claims it with its thread pointer (never
// waits on a lock: after a bounded spin it gives up and reports failure).
// 0: free.
volatile uintptr_t g_pipe_busy = 0;
// Set when pipe2 failed: the method is "none" until the next capture.
volatile int g_pipe_failed = 0;
// 4 KiB per pipe round trip keeps each write atomic and the pipe never full.
constexpr size_t kPipeChunk = 4096;
// Where bytes left in the pipe are drained to, by the lock's holder only.
// Static, not on the stack: a thread on a small signal stack reads through
// the pipe.
char g_sink[kPipeChunk];

volatile pid_t g_pinned_pid = 0;
// The pinned pid is another process's (safe_read_remote): no pipe.
volatile int g_remote = 0;

bool read_vm(void* dst, uintptr_t addr, size_t n, int* err) {
  struct iovec local = {dst, n};
  struct iovec remote = {reinterpret_cast<void*>(addr), n};
  pid_t pid = g_pinned_pid;
  if (!pid) pid = sys_getpid();
  long got = syscall(SYS_process_vm_readv, static_cast<long>(pid), &local, 1UL, &remote, 1UL, 0UL);
  if (got < 0) {
    *err = errno;
    return false;
  }
  *err = 0;
  return static_cast<size_t>(got) == n;
}

// With g_pipe_busy held. A plain system call: async-signal-safe. A process
// out of descriptors gets no pipe, and its reads fail.
bool open_pipe() {
  if (g_pipe[0] >= 0) return true;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    // No pipe (out of descriptors even after the capture freed its
    // reserve): no reads for the rest of this capture, and the report says
    // so ("none"); the next capture tries again (safe_read_new_capture).
    g_pipe_failed = 1;
    g_method = static_cast<int>(SafeReadMethod::kNone);
    return false;
  }
  g_pipe_id[0] = fd_identity(fds[0]);
  g_pipe_id[1] = fd_identity(fds[1]);
  g_pipe[1] = fds[1];
  // Published last: safe_read_check_fds (the owner, without g_pipe_busy)
  // sees a whole pipe or none.
  __atomic_store_n(&g_pipe[0], fds[0], __ATOMIC_RELEASE);
  return true;
}

// Claims the pipe: a bounded spin, never a wait on a lock; after the first
// thousand tries it yields the CPU each time (the owner's Python walk and
// the answering threads' unwinds read at once, on few CPUs). False: given
// up after 5 ms, or at once when this very thread holds it (a read it was
// interrupted in, or one a jump left: safe_read_end_reads lets that go).
bool lock_pipe() {
  const uintptr_t self = thread_pointer();
  uint64_t give_up = 0;
  for (int spins = 0;;) {
    uintptr_t holder = 0;
    if (__atomic_compare_exchange_n(&g_pipe_busy, &holder, self, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED)) {
      return true;
    }
    if (holder == self) return false;
    if (++spins < 1000) continue;
    uint64_t now = monotonic_ns();
    if (!give_up) give_up = now + 5 * 1000000ull;
    if (now > give_up) return false;
    syscall(SYS_sched_yield);
  }
}

void unlock_pipe() {
  __atomic_store_n(&g_pipe_busy, 0, __ATOMIC_RELEASE);
}

bool read_pipe(void* dst, uintptr_t addr, size_t n) {
  if (!lock_pipe()) return false;
  if (!open_pipe()) {
    unlock_pipe();
    return false;
  }
  bool ok = true;
  char* out = static_cast<char*>(dst);
  while (n > 0 && ok) {
    size_t chunk = n < kPipeChunk ? n : kPipeChunk;
    ssize_t w = write(g_pipe[1], reinterpret_cast<const void*>(addr), chunk);
    if (w != static_cast<ssize_t>(chunk)) {
      if (w > 0) {  // drain what went in so the pipe stays empty
        (void)!read(g_pipe[0], g_sink, static_cast<size_t>(w));
      }
      ok = false;
      break;
    }
    ssize_t r = read(g_pipe[0], out, chunk);
    if (r != static_cast<ssize_t>(chunk)) ok = false;
    out += chunk;
    addr += chunk;
    n -= chunk;
  }
  unlock_pipe();
  return ok;
}

}  // namespace

void safe_read_init() {
  if (!lock_pipe()) return;
  open_pipe();
  unlock_pipe();
}

void safe_read_end_reads() {
  if (__atomic_load_n(&g_pipe_busy, __ATOMIC_ACQUIRE) != thread_pointer()) return;
  // A read this thread was jumped out of: what it left in the pipe goes,
  // then the pipe is free again.
  if (g_pipe[0] >= 0) {
    // The pipe is non-blocking: stops when empty.
    while (syscall(SYS_read, g_pipe[0], g_sink, sizeof g_sink) > 0) {
    }
  }
  unlock_pipe();
}

void safe_read_new_capture() {
  if (__atomic_exchange_n(&g_pipe_failed, 0, __ATOMIC_ACQ_REL)) {
    g_method = static_cast<int>(SafeReadMethod::kPipe);
  }
}

void safe_read_check_fds() {
  int r = __atomic_load_n(&g_pipe[0], __ATOMIC_ACQUIRE);
  if (r >= 0 && (!fd_still(r, g_pipe_id[0]) || !fd_still(g_pipe[1], g_pipe_id[1]))) {
    // The program closed or reused our pipe: never write its files.
    g_pipe[0] = g_pipe[1] = -1;
  }
}

void safe_read_many(void* const* dst, const uintptr_t* addr, const size_t* n, bool* ok, int count) {
  int i = 0;
  if (g_method == static_cast<int>(SafeReadMethod::kVmReadv)) {
    constexpr int kBatch = 64;
    struct iovec local[kBatch], remote[kBatch];
    pid_t pid = g_pinned_pid;
    if (!pid) pid = sys_getpid();
    while (i < count) {
      int k = count - i < kBatch ? count - i : kBatch;
      for (int j = 0; j < k; ++j) {
        local[j] = {dst[i + j], n[i + j]};
        remote[j] = {reinterpret_cast<void*>(addr[i + j]), n[i + j]};
      }
      long got = syscall(SYS_process_vm_readv, static_cast<long>(pid), local, static_cast<long>(k),
                         remote, static_cast<long>(k), 0UL);
      if (got < 0) break;  // denied: the one-by-one path below decides
      // The kernel stops at the first range it cannot read: the ones before
      // are whole, that one failed, the rest go in the next call.
      int j = 0;
      for (size_t left = static_cast<size_t>(got); j < k && left >= n[i + j]; ++j) {
        left -= n[i + j];
        ok[i + j] = true;
      }
      if (j < k) ok[i + j++] = false;
      i += j;
    }
  }
  for (; i < count; ++i) ok[i] = safe_read(dst[i], addr[i], n[i]);
}

void safe_read_pin_pid(pid_t pid) {
  g_pinned_pid = pid;
}

FAULTLINE_START_TEXT void safe_read_reset_after_fork() {
  g_pinned_pid = 0;
  if (g_pipe[0] >= 0) {
    close(g_pipe[0]);
    close(g_pipe[1]);
    g_pipe[0] = g_pipe[1] = -1;
  }
  // The child's own pipe is made by its first pipe read.
  g_pipe_busy = 0;
  safe_read_new_capture();
}

void safe_read_remote(pid_t pid) {
  g_pinned_pid = pid;
  g_remote = 1;
  g_method = static_cast<int>(SafeReadMethod::kVmReadv);
}

pid_t safe_read_remote_pid() {
  return g_remote ? g_pinned_pid : 0;
}

void safe_read_force(SafeReadMethod m) {
  g_method = static_cast<int>(m);
}

SafeReadMethod safe_read_method() {
  return static_cast<SafeReadMethod>(g_method);
}

const char* safe_read_method_name() {
  switch (safe_read_method()) {
    case SafeReadMethod::kVmReadv:
      return "process_vm_readv";
    case SafeReadMethod::kPipe:
      return "pipe";
    case SafeReadMethod::kNone:
      break;
  }
  return "none";
}

bool safe_read(void* dst, uintptr_t addr, size_t n) {
  if (n == 0) return true;
  if (addr == 0 || addr + n < addr) return false;
  if (g_method == static_cast<int>(SafeReadMethod::kVmReadv)) {
    int err = 0;
    if (read_vm(dst, addr, n, &err)) return true;
    // EFAULT/partial: the memory is bad. Anything else (EPERM from seccomp,
    // ENOSYS): the method is unusable; switch for good and retry.
    if (g_remote) return false;
    if (err == EPERM || err == ENOSYS || err == EACCES) {
      g_method = static_cast<int>(SafeReadMethod::kPipe);
    } else {
      return false;
    }
  }
  if (g_method == static_cast<int>(SafeReadMethod::kPipe)) return read_pipe(dst, addr, n);
  return false;
}

long safe_read_cstr(char* dst, size_t cap, uintptr_t addr) {
  if (cap == 0) return -1;
  size_t len = 0;
  // Read in small pieces that do not cross a page, so a string that ends just
  // before an unmapped page is still read.
  while (len + 1 < cap) {
    size_t page_left = 4096 - ((addr + len) & 4095);
    size_t want = cap - 1 - len;
    if (want > page_left) want = page_left;
    if (want > 256) want = 256;
    if (!safe_read(dst + len, addr + len, want)) {
      if (len == 0) {
        dst[0] = '\0';
        return -1;
      }
      break;
    }
    for (size_t i = 0; i < want; ++i) {
      if (dst[len + i] == '\0') return static_cast<long>(len + i);
    }
    len += want;
  }
  dst[len] = '\0';
  return static_cast<long>(len);
}

}  // namespace faultline::core
