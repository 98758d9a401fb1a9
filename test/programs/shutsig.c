/* A program with its own SIGINT handler that counts and carries on, and
 * SIGTERM at its default (or, `info`, a handler that prints who sent it).
 * Idle threads make a shutdown report take a while, so that a second signal
 * lands while it is being written.
 *   shutsig NTHREADS WANT [info]
 * Prints "ready", waits until WANT signals were handled (at most ~3 s),
 * prints what it saw and exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ints;
static volatile sig_atomic_t terms, term_pid, term_code;

/* Atomic: two threads may run it at once. */
static void on_int(int s) {
  (void)s;
  __atomic_fetch_add(&ints, 1, __ATOMIC_SEQ_CST);
}

static void on_term(int s, siginfo_t* i, void* u) {
  (void)s;
  (void)u;
  term_pid = i->si_pid;
  term_code = i->si_code;
  terms++;
}

static void* idle(void* a) {
  (void)a;
  for (;;) pause();
  return 0;
}

int main(int argc, char** argv) {
  int nthreads = argc > 1 ? atoi(argv[1]) : 0;
  int want = argc > 2 ? atoi(argv[2]) : 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_int;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, 0);
  if (argc > 3 && strcmp(argv[3], "info") == 0) {
    sa.sa_sigaction = on_term;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGTERM, &sa, 0);
  }
  for (int i = 0; i < nthreads; ++i) {
    pthread_t t;
    pthread_create(&t, 0, idle, 0);
  }
  printf("ready\n");
  fflush(stdout);
  for (int i = 0; i < 3000 && __atomic_load_n(&ints, __ATOMIC_SEQ_CST) + terms < want; ++i)
    usleep(1000);
  usleep(20000); /* a signal that would come late still lands before the count */
  printf("SIGINT handled %d times, SIGTERM %d", (int)ints, (int)terms);
  if (terms) printf(" from pid %d si_code %d", (int)term_pid, (int)term_code);
  printf("\n");
  fflush(stdout);
  return 0;
}
