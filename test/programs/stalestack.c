/* A thread replaces the signal stack faultline gave it (as
 * faulthandler.enable() in a thread does), then exits: faultline unmaps its
 * stack. A file is mapped MAP_SHARED where that stack was, and a thread
 * faultline did not start (libc's own pthread_create) gets the exited
 * thread's id (through /proc/sys/kernel/ns_last_pid: needs root). A live
 * dump must leave the file alone: no block allocated, nothing dirtied.
 *
 *   stalestack FILE
 * prints "blocks BEFORE AFTER", or "no-reuse" when the id could not be had. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static pid_t g_a_tid;
static uintptr_t g_a_hi;
static volatile int g_stop;
static volatile pid_t g_b_tid;

static void* thread_a(void* arg) {
  (void)arg;
  g_a_tid = (pid_t)syscall(SYS_gettid);
  stack_t cur;
  sigaltstack(NULL, &cur);
  g_a_hi = (uintptr_t)cur.ss_sp + cur.ss_size;
  stack_t mine = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
  sigaltstack(&mine, NULL);
  return NULL;
}

static void* thread_b(void* arg) {
  (void)arg;
  g_b_tid = (pid_t)syscall(SYS_gettid);
  while (!g_stop) usleep(1000);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  pthread_t t;
  pthread_create(&t, NULL, thread_a, NULL); /* faultline's: gets its signal stack */
  pthread_join(t, NULL);
  if (!g_a_hi) return 2;
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, 1 << 20) != 0) return 2;
  void* m = mmap((void*)(g_a_hi - (64 << 10)), 64 << 10, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    return 2;
  }
  struct stat before, after;
  fstat(fd, &before);
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  int (*libc_create)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*) =
      libc ? dlsym(libc, "pthread_create") : NULL;
  if (!libc_create) return 2;
  for (int tries = 0; tries < 50; ++tries) {
    FILE* f = fopen("/proc/sys/kernel/ns_last_pid", "w");
    if (!f) break;
    fprintf(f, "%d", g_a_tid - 1);
    fclose(f);
    g_stop = 0;
    g_b_tid = 0;
    libc_create(&t, NULL, thread_b, NULL);
    while (!g_b_tid) usleep(100);
    if (g_b_tid == g_a_tid) break;
    g_stop = 1;
    pthread_join(t, NULL);
    g_b_tid = 0;
  }
  if (g_b_tid != g_a_tid) {
    printf("no-reuse\n");
    return 0;
  }
  /* A live dump, on this thread (SIGUSR2 under FAULTLINE_DUMP=1). */
  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR2);
  fstat(fd, &after);
  printf("blocks %ld %ld\n", (long)before.st_blocks, (long)after.st_blocks);
  g_stop = 1;
  pthread_join(t, NULL);
  return 0;
}
