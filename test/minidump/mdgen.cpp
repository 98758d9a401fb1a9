// Builds a minidump from a captured state without crashing: a few threads
// park with their registers saved by getcontext(), the main thread saves its
// own in md_leaf (called by md_middle, called by main), and the writer runs
// over them. The test opens the file with independent readers (lldb, a Python
// parser) and checks threads, registers, stacks and modules.
//
//   mdgen OUT.dmp NTHREADS
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/base/arena.h"
#include "core/base/safe_read.h"
#include "core/minidump/minidump.h"
#include "core/minidump/minidump_arch.h"
#include "core/modules/modules.h"

using namespace faultline::core;

namespace {

constexpr int kMax = 64;
ucontext_t g_ctx[kMax + 1];
pid_t g_tid[kMax + 1];
volatile int g_ready = 0;
volatile int g_done = 0;
// Parked threads stay until the minidump is written: a thread that returned
// from md_park early would change the stack window being saved.
volatile int g_release = 0;

extern "C" __attribute__((noinline)) void md_park(int i) {
  g_tid[i] = static_cast<pid_t>(syscall(SYS_gettid));
  getcontext(&g_ctx[i]);
  if (g_done) return;
  __atomic_add_fetch(&g_ready, 1, __ATOMIC_SEQ_CST);
  while (!g_release) usleep(1000);
}

void* worker(void* arg) {
  md_park(static_cast<int>(reinterpret_cast<intptr_t>(arg)));
  return nullptr;
}

int g_fd;
int g_n;

extern "C" __attribute__((noinline)) int md_leaf() {
  g_tid[0] = static_cast<pid_t>(syscall(SYS_gettid));
  getcontext(&g_ctx[0]);
  if (g_done) return 0;
  g_done = 1;
  static Arena arena;
  arena.init(4 << 20);
  static ModuleTable table;
  table.capacity = 2048;
  table.items = arena.alloc_array<Module>(table.capacity);
  static CaptureErrors errors;
  collect_modules(&table, &arena, &errors);
  static MinidumpThread threads[kMax + 1];
  static ArchThreadRegs regs[kMax + 1];
  for (int i = 0; i <= g_n; ++i) {
    minidump_save_regs(&regs[i], g_ctx[i], /*foreign_fp=*/true);
    threads[i].tid = g_tid[i];
    threads[i].regs = &regs[i];
  }
  static const char cmdline[] = "mdgen\0test";
  MinidumpInput in = {};
  in.signo = 11;
  in.code = 1;
  in.address = 0x10;
  in.crashed_tid = g_tid[0];
  in.threads = threads;
  in.nthreads = g_n + 1;
  in.modules = &table;
  in.cmdline = cmdline;
  in.cmdline_len = sizeof cmdline;
  in.stack_bytes = kMinidumpDefaultStack;
  MinidumpResult r = {};
  if (!write_minidump(g_fd, in, &r)) {
    fprintf(stderr, "write_minidump failed: errno %d\n", r.err);
    return 1;
  }
  printf("{\"bytes\": %llu, \"modules\": %d, \"crashed_tid\": %d}\n",
         static_cast<unsigned long long>(r.bytes), table.count, g_tid[0]);
  return 0;
}

extern "C" __attribute__((noinline)) int md_middle() {
  int rc = md_leaf();
  asm volatile("" ::: "memory");  // not a tail call
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mdgen OUT.dmp NTHREADS\n");
    return 2;
  }
  g_n = atoi(argv[2]);
  if (g_n < 0 || g_n > kMax) return 2;
  safe_read_init();
  modules_init();
  g_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (g_fd < 0) return 1;
  pthread_t th[kMax];
  for (int i = 1; i <= g_n; ++i)
    pthread_create(&th[i - 1], nullptr, worker, reinterpret_cast<void*>(static_cast<intptr_t>(i)));
  while (g_ready < g_n) usleep(1000);
  int rc = md_middle();
  g_release = 1;
  for (int i = 0; i < g_n; ++i) pthread_join(th[i], nullptr);
  close(g_fd);
  return rc;
}
