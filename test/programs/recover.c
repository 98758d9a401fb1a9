/* A program whose own SIGSEGV handler recovers (siglongjmp), behind
 * faultline (FAULTLINE_STAY_IN_FRONT=1). Another thread holds the loader's
 * lock for 4 s around the crash, so libunwind (FAULTLINE_UNWINDER=libunwind)
 * blocks and a short FAULTLINE_WATCHDOG fires during the capture. After
 * recovering and waiting for that thread, the program asks for a live dump
 * (SIGUSR2, FAULTLINE_DUMP=1) from dump_after_recovery and exits 0.
 * Usage: recover */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static sigjmp_buf g_recover;
volatile int* volatile g_null;
volatile int g_sink;

static void on_segv(int signo) {
  (void)signo;
  siglongjmp(g_recover, 1);
}

static volatile int g_holding;

static int hold(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)info;
  (void)size;
  (void)arg;
  g_holding = 1;
  sleep(4);
  return 1;
}

static void* holder(void* arg) {
  dl_iterate_phdr(hold, NULL);
  return arg;
}

__attribute__((noinline)) void crash_and_recover(void) {
  g_sink = *g_null;
}

__attribute__((noinline)) void dump_after_recovery(void) {
  raise(SIGUSR2);
  g_sink = 1; /* not a tail call */
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_segv;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NODEFER;
  sigaction(SIGSEGV, &sa, NULL);
  pthread_t t;
  pthread_create(&t, NULL, holder, NULL);
  while (!g_holding) usleep(1000);
  if (sigsetjmp(g_recover, 1) == 0) {
    crash_and_recover();
    return 3; /* not reached */
  }
  pthread_join(t, NULL);
  dump_after_recovery();
  printf("recovered\n");
  return 0;
}
