/* How deep a thread answering the thread-dump signal goes into a small
 * signal stack, for the stack-budget test.
 *
 *   sigstack SIZE [pipe] [autodisarm]
 *
 * The main thread gets a painted signal stack of SIZE bytes (like the ~16 KiB
 * one CPython's faulthandler gives it) with a guard page below, and waits
 * some frames deep; a worker asks for a live dump (SIGUSR2 to itself, under
 * FAULTLINE_DUMP=1), so the main thread answers on that stack. Afterwards it
 * prints how many bytes of the stack were written: "used N of SIZE".
 * "pipe": process_vm_readv is denied (seccomp), so faultline reads memory
 * through its pipe fallback. "autodisarm": the signal stack is set with
 * SS_AUTODISARM, so inside a handler sigaltstack says it is disabled. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31) /* linux/signal.h; glibc does not define it */
#endif

static volatile int g_go = 0, g_done = 0;

static void* worker(void* arg) {
  (void)arg;
  while (!g_go) usleep(1000);
  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR2);
  g_done = 1;
  return NULL;
}

__attribute__((noinline)) static int wait_deep(int n) {
  volatile char pad[64];
  pad[0] = (char)n;
  if (n == 0) {
    g_go = 1;
    while (!g_done) __asm__ volatile("" ::: "memory");
    return 0;
  }
  return wait_deep(n - 1) + pad[0];
}

static void deny_process_vm_readv(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("seccomp");
    exit(2);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: sigstack SIZE [pipe] [autodisarm]\n");
    return 2;
  }
  size_t size = strtoul(argv[1], NULL, 0);
  int autodisarm = 0;
  for (int i = 2; i < argc; ++i) {
    if (strcmp(argv[i], "pipe") == 0) deny_process_vm_readv();
    if (strcmp(argv[i], "autodisarm") == 0) autodisarm = 1;
  }
  size_t page = 4096, len = (size + page - 1) / page * page + page;
  unsigned char* map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return 2;
  mprotect(map, page, PROT_NONE);
  unsigned char* stack = map + len - size;
  memset(map + page, 0xAA, len - page);
  stack_t ss = {.ss_sp = stack, .ss_size = size, .ss_flags = autodisarm ? (int)SS_AUTODISARM : 0};
  if (sigaltstack(&ss, NULL) != 0) {
    perror("sigaltstack");
    return 2;
  }
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  wait_deep(40);
  pthread_join(t, NULL);
  unsigned char* p = map + page;
  while (p < map + len && *p == 0xAA) ++p;
  printf("used %ld of %zu\n", (long)(map + len - p), size);
  return 0;
}
