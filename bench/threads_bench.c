/* A process with N threads, each 50 frames deep and then blocked, for the
 * capture benchmark: bench_threads N  (prints "ready" and waits on stdin;
 * "crash" on stdin makes the main thread write its CLOCK_MONOTONIC time in
 * nanoseconds ("fault NS") to stderr and read address 0: bench/perf.py times
 * the crash from there to the report's rename. stderr, not stdout: the
 * harness points it at a file, so no reader wakes up to compete with the
 * capture for the CPUs it is timing). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pthread_barrier_t g_barrier;

__attribute__((noinline)) static int deep(int n) {
  volatile int pad = n;
  if (n > 0) return deep(n - 1) + pad;
  pthread_barrier_wait(&g_barrier);
  for (;;) pause();
  return pad;
}

static void* run(void* arg) {
  (void)arg;
  return (void*)(long)deep(48); /* + run + start_thread/clone = ~50 frames */
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 16;
  pthread_barrier_init(&g_barrier, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    pthread_create(&t, NULL, run, NULL);
  }
  pthread_barrier_wait(&g_barrier);
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
