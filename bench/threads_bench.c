/* A process with N threads, each 50 frames deep and then blocked, for the
 * capture benchmark: bench_threads N  (prints "ready" and waits on stdin;
 * "crash" on stdin makes the main thread write its CLOCK_MONOTONIC time in
 * nanoseconds ("fault NS") to stderr and read address 0: bench/perf.py times
 * the crash from there to the report's rename. stderr, not stdout: the
 * harness points it at a file, so no reader wakes up to compete with the
 * capture for the CPUs it is timing).
 *
 * bench_threads N floor: the floor under any capture that asks every thread
 * for its stack. Each thread gets an alternate signal stack of its own (64
 * KiB, fresh, as faultline gives a thread); once all are blocked, the main
 * thread sends each one a signal whose handler does nothing but count its
 * answer (the last one wakes the main thread), and prints the time from the
 * first signal to the last answer ("floor NS"): once per process, as a crash
 * asks once. Before each signal the top 16 KiB of the thread's signal stack
 * are populated (MADV_POPULATE_WRITE), as faultline does: what is left is
 * the signal's delivery, the kernel's signal frame on a stack the thread has
 * never used, the context switches and the return. Run without the preload. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { kAltStack = 64 << 10, kPopulate = 16 << 10, kMaxThreads = 4096 };

static pthread_barrier_t g_barrier;
static int g_floor;    /* the floor mode */
static int g_n;        /* threads */
static int g_answered; /* a futex word (floor mode) */
static pid_t g_tids[kMaxThreads];
static char* g_stacks[kMaxThreads];

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_signal(int signo, siginfo_t* info, void* uc) {
  (void)signo, (void)info, (void)uc;
  if (__atomic_add_fetch(&g_answered, 1, __ATOMIC_SEQ_CST) == g_n)
    syscall(SYS_futex, &g_answered, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

__attribute__((noinline)) static int deep(int n) {
  volatile int pad = n;
  if (n > 0) return deep(n - 1) + pad;
  pthread_barrier_wait(&g_barrier);
  for (;;) pause();
  return pad;
}

static void* run(void* arg) {
  long i = (long)arg;
  if (g_floor) {
    g_tids[i] = (pid_t)syscall(SYS_gettid);
    char* p = mmap(NULL, kAltStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) abort();
    g_stacks[i] = p;
    stack_t ss = {.ss_sp = p, .ss_size = kAltStack, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) abort();
  }
  return (void*)(long)deep(48); /* + run + start_thread/clone = ~50 frames */
}

static int floor_run(void) {
  pid_t pid = getpid();
  int signo = SIGRTMIN + 3;
  usleep(20000); /* every thread back in pause() */
  uint64_t t0 = now_ns();
  for (int i = 0; i < g_n; ++i) {
    madvise(g_stacks[i] + kAltStack - kPopulate, kPopulate, MADV_POPULATE_WRITE);
    syscall(SYS_tgkill, pid, g_tids[i], signo);
  }
  int a;
  while ((a = __atomic_load_n(&g_answered, __ATOMIC_SEQ_CST)) < g_n)
    syscall(SYS_futex, &g_answered, FUTEX_WAIT_PRIVATE, a, NULL, NULL, 0);
  printf("floor %llu\n", (unsigned long long)(now_ns() - t0));
  return 0;
}

int main(int argc, char** argv) {
  g_n = argc > 1 ? atoi(argv[1]) : 16;
  g_floor = argc > 2 && strcmp(argv[2], "floor") == 0;
  if (g_n < 0 || (g_floor && (g_n < 1 || g_n > kMaxThreads))) {
    fprintf(stderr, "usage: bench_threads N [floor]  (floor: 1 <= N <= %d)\n", kMaxThreads);
    return 2;
  }
  if (g_floor) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigaction(SIGRTMIN + 3, &sa, NULL);
  }
  pthread_barrier_init(&g_barrier, NULL, (unsigned)g_n + 1);
  for (long i = 0; i < g_n; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, run, (void*)i) != 0) abort();
  }
  pthread_barrier_wait(&g_barrier);
  if (g_floor) return floor_run();
  printf("ready\n");
  fflush(stdout);
  char buf[16];
  long got;
  while ((got = read(0, buf, sizeof buf)) > 0) {
    if (got >= 5 && buf[0] == 'c') { /* "crash\n": SIGSEGV */
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      fprintf(stderr, "fault %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
      return *(volatile int*)(got - 5);
    }
  }
  return 0;
}
