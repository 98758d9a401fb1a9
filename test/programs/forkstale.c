/* Fork from a faultline-started thread T; in the child that thread exits, so
 * faultline unmaps its signal stack. A file is mapped MAP_SHARED where that
 * stack was, and a thread of the child that faultline did not start gets T's
 * parent-side id (ns_last_pid: needs root). A live dump in the child must
 * leave the file alone.
 *
 *   forkstale FILE
 * the child prints "blocks BEFORE AFTER", or "no-reuse". */
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
#include <sys/wait.h>
#include <unistd.h>

static pid_t g_t_tid;
static uintptr_t g_hi;
static int g_pipe[2];
static const char* g_file;
static volatile int g_stop;
static volatile pid_t g_b_tid;

static void* thread_b(void* a) { (void)a; g_b_tid = syscall(SYS_gettid); while (!g_stop) usleep(1000); return NULL; }

static void* child_worker(void* a) {
  (void)a;
  char c; read(g_pipe[0], &c, 1);            /* the parent's T is gone */
  int fd = open(g_file, O_RDWR | O_CREAT | O_TRUNC, 0600);
  ftruncate(fd, 1 << 20);
  void* m = MAP_FAILED;
  for (int i = 0; i < 2000 && m == MAP_FAILED; ++i) {  /* until the child's T' unmapped it */
    m = mmap((void*)(g_hi - (64 << 10)), 64 << 10, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (m == MAP_FAILED) usleep(1000);
  }
  if (m == MAP_FAILED) { perror("mmap"); FILE* mf = fopen("/proc/self/maps", "r"); char line[512]; unsigned long lo = g_hi - (64 << 10);
    while (fgets(line, sizeof line, mf)) { unsigned long a, b; sscanf(line, "%lx-%lx", &a, &b); if (a < g_hi + 8192 && b + 8192 > lo) fputs(line, stdout); }
    printf("no-map %lx\n", (unsigned long)g_hi); fflush(stdout); _exit(2); }
  struct stat before, after; fstat(fd, &before);
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  int (*libc_create)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*) = dlsym(libc, "pthread_create");
  pthread_t t;
  for (int tries = 0; tries < 50; ++tries) {
    FILE* f = fopen("/proc/sys/kernel/ns_last_pid", "w"); if (!f) break;
    fprintf(f, "%d", g_t_tid - 1); fclose(f);
    g_stop = 0; g_b_tid = 0;
    libc_create(&t, NULL, thread_b, NULL);
    while (!g_b_tid) usleep(100);
    if (g_b_tid == g_t_tid) break;
    g_stop = 1; pthread_join(t, NULL); g_b_tid = 0;
  }
  if (g_b_tid != g_t_tid) { printf("no-reuse\n"); fflush(stdout); _exit(0); }
  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR2);
  fstat(fd, &after);
  printf("blocks %ld %ld\n", (long)before.st_blocks, (long)after.st_blocks); fflush(stdout);
  _exit(0);
}

static void* thread_t(void* a) {
  (void)a;
  g_t_tid = syscall(SYS_gettid);
  stack_t cur; sigaltstack(NULL, &cur);
  g_hi = (uintptr_t)cur.ss_sp + cur.ss_size;
  pid_t pid = fork();
  if (pid == 0) {
    pthread_t w;
    pthread_create(&w, NULL, child_worker, NULL);
    pthread_exit(NULL);  /* the child's only original thread ends: its stack is unmapped */
  }
  return (void*)(intptr_t)pid;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  g_file = argv[1];
  pipe(g_pipe);
  pthread_t t; void* r;
  pthread_create(&t, NULL, thread_t, NULL);
  pthread_join(t, &r);
  usleep(100000);
  write(g_pipe[1], "x", 1);
  int st; waitpid((pid_t)(intptr_t)r, &st, 0);
  return 0;
}
