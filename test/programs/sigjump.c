/* A program that takes faultline's thread-dump signal for itself and whose
 * handler jumps out (siglongjmp), for the thread-signal reclaim test.
 *
 *   sigjump SIGNO
 *
 * Installs a handler for SIGNO after faultline (replacing faultline's), asks
 * for a live dump (SIGUSR2, under FAULTLINE_DUMP=1: faultline puts its
 * handler back and hands the program's own SIGNO on to this one), then
 * raises SIGNO on the main thread three times; the handler counts each call
 * and jumps back out of it. Prints "calls N" and crashes (a report with a
 * waiting worker thread). */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static sigjmp_buf g_back;
static volatile int g_calls = 0;

static void on_signal(int signo) {
  (void)signo;
  ++g_calls;
  siglongjmp(g_back, 1);
}

static void* waiter(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

int main(int argc, char** argv) {
  int signo = argc > 1 ? atoi(argv[1]) : SIGRTMAX - 3;
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(signo, &sa, NULL);
  pthread_t t;
  pthread_create(&t, NULL, waiter, NULL);
  usleep(50 * 1000);
  raise(SIGUSR2); /* a live dump: faultline's handler goes back */
  usleep(500 * 1000);
  for (int i = 0; i < 3; ++i) {
    if (sigsetjmp(g_back, 1) == 0) raise(signo);
  }
  printf("calls %d\n", g_calls);
  fflush(stdout);
  return *(volatile int*)(long)(g_calls - g_calls);
}
