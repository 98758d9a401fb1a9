/* More threads in the program's own handler of faultline's thread-dump
 * signal at once than faultline keeps track of (256 slots guard against a
 * handler that hands the signal back in a loop): the rest must still reach
 * the program's handler, not be dropped.
 *
 *   sigcrowd SIGNO N
 *
 * Starts N threads, installs a handler for SIGNO after faultline (replacing
 * faultline's), asks for a live dump (SIGUSR2, under FAULTLINE_DUMP=1:
 * faultline puts its handler back and hands the program's own SIGNO on to
 * this one), then sends SIGNO to every thread. Each call waits inside the
 * handler until all N are inside (up to 20 s). Prints "inside I done D" and
 * exits 0 when all N came in. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_inside;
static atomic_int g_done;
static int g_n;

static void on_signal(int signo) {
  (void)signo;
  atomic_fetch_add(&g_inside, 1);
  for (int i = 0; i < 20000 && atomic_load(&g_inside) < g_n; ++i) {
    struct timespec ms = {0, 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  atomic_fetch_add(&g_done, 1);
}

static void* waiter(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

int main(int argc, char** argv) {
  int signo = argc > 1 ? atoi(argv[1]) : SIGRTMAX - 3;
  g_n = argc > 2 ? atoi(argv[2]) : 300;
  pthread_t* threads = calloc((size_t)g_n, sizeof *threads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  for (int i = 0; i < g_n; ++i) {
    if (pthread_create(&threads[i], &attr, waiter, NULL) != 0) {
      fprintf(stderr, "pthread_create failed at %d\n", i);
      return 2;
    }
  }
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(signo, &sa, NULL);
  usleep(50 * 1000);
  raise(SIGUSR2); /* a live dump: faultline's handler goes back */
  usleep(500 * 1000);
  for (int i = 0; i < g_n; ++i) pthread_kill(threads[i], signo);
  for (int i = 0; i < 30000 && atomic_load(&g_done) < g_n; ++i) usleep(1000);
  printf("inside %d done %d\n", atomic_load(&g_inside), atomic_load(&g_done));
  fflush(stdout);
  return atomic_load(&g_done) == g_n ? 0 : 1;
}
