/* A healthy job that a live dump must leave undisturbed: threads wait in
 * poll(), nanosleep(), epoll_wait() and sigwait(), and each one exits
 * non-zero if its call ever fails (EINTR) or returns before its time.
 *   dumpwait [vfork [N] | busy]
 *   dumpwait term
 * Prints "ready" once every thread is about to wait, then runs until killed
 * (SIGKILL) or until a thread sees its call disturbed (exit 2..5). With
 * "vfork", N more threads (1 by default) each wait for a vfork child that
 * sleeps an hour: a wait no ptrace stop can interrupt. With "busy", two more:
 * "futexer" waits on a condition variable (a futex in libc), "spinner"
 * spins in a function compiled at -O2 without frame pointers
 * (dumpwait_spin.c) and "untabled" in one without unwind tables
 * (dumpwait_notables.c).
 * With "term", one thread only, as a service's main loop: epoll_wait(-1)
 * until a SIGTERM handler sets the stop flag, then "stopped" and exit 0.
 *   dumpwait stopcont
 * One thread in epoll_wait(-1) with no handler: Linux ends it with EINTR
 * after a stop (SIGSTOP) and SIGCONT; then "eintr" and exit 0.
 *   dumpwait rtsig
 * A thread named "receiver" waits in pause() and counts the SIGRTMIN it
 * handles (the other thread blocks it: a SIGRTMIN sent to the process is
 * the receiver's). On a line on stdin, "got N" and exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static int g_pipe[2];
static pthread_barrier_t g_ready;

static void disturbed(const char* what, int rc, int code) {
  fprintf(stderr, "dumpwait: %s returned %d: %s\n", what, rc, rc < 0 ? strerror(errno) : "early");
  exit(code);
}

/* Named callers: a dump of this thread must show them. */
NOINLINE void wait_in_poll(void) {
  struct pollfd p = {g_pipe[0], POLLIN, 0};
  int rc = poll(&p, 1, -1);
  disturbed("poll", rc, 2);
}

NOINLINE void wait_in_nanosleep(void) {
  /* An hour: any return is early. */
  struct timespec ts = {3600, 0};
  int rc = nanosleep(&ts, NULL);
  disturbed("nanosleep", rc, 3);
}

NOINLINE void wait_in_epoll(int ep) {
  struct epoll_event ev;
  int rc = epoll_wait(ep, &ev, 1, -1);
  disturbed("epoll_wait", rc, 4);
}

NOINLINE void wait_in_sigwait(const sigset_t* set) {
  int sig = 0;
  int rc = sigwait(set, &sig);
  fprintf(stderr, "dumpwait: sigwait returned %d with signal %d\n", rc, sig);
  exit(5);
}

static void* poller(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  wait_in_poll();
  return NULL;
}

static void* sleeper(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  wait_in_nanosleep();
  return NULL;
}

static void* epoller(void* arg) {
  (void)arg;
  int ep = epoll_create1(0);
  struct epoll_event ev = {EPOLLIN, {0}};
  epoll_ctl(ep, EPOLL_CTL_ADD, g_pipe[0], &ev);
  pthread_barrier_wait(&g_ready);
  wait_in_epoll(ep);
  return NULL;
}

static void* waiter(void* arg) {
  sigset_t* set = arg;
  pthread_barrier_wait(&g_ready);
  wait_in_sigwait(set);
  return NULL;
}

static void* vforker(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  pid_t child = vfork();
  if (child == 0) {
    struct timespec ts = {3600, 0};
    nanosleep(&ts, NULL);
    _exit(0);
  }
  for (;;) pause();
  return NULL;
}

uint64_t spin_without_frame_pointer(volatile int* stop);
uint64_t spin_without_unwind_tables(volatile int* stop);

NOINLINE void wait_in_futex(void) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  pthread_mutex_lock(&mu);
  int rc = pthread_cond_wait(&cv, &mu);
  disturbed("pthread_cond_wait", rc, 6);
}

NOINLINE void spin_in_user_code(void) {
  static volatile int never;
  uint64_t x = spin_without_frame_pointer(&never);
  fprintf(stderr, "dumpwait: the spin ended (%llu)\n", (unsigned long long)x);
  exit(7);
}

NOINLINE void spin_in_untabled_code(void) {
  static volatile int never;
  uint64_t x = spin_without_unwind_tables(&never);
  fprintf(stderr, "dumpwait: the spin ended (%llu)\n", (unsigned long long)x);
  exit(8);
}

static void* untabled(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  spin_in_untabled_code();
  return NULL;
}

static void* futexer(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  wait_in_futex();
  return NULL;
}

static void* spinner(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  spin_in_user_code();
  return NULL;
}

static volatile sig_atomic_t g_stop = 0;

static void on_term(int sig) {
  (void)sig;
  g_stop = 1;
}

static int serve_until_term(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  int ep = epoll_create1(0);
  struct epoll_event ev = {EPOLLIN, {0}};
  epoll_ctl(ep, EPOLL_CTL_ADD, g_pipe[0], &ev);
  printf("ready\n");
  fflush(stdout);
  while (!g_stop) epoll_wait(ep, &ev, 1, -1);
  printf("stopped\n");
  return 0;
}

static int wait_through_stop(void) {
  int ep = epoll_create1(0);
  struct epoll_event ev = {EPOLLIN, {0}};
  epoll_ctl(ep, EPOLL_CTL_ADD, g_pipe[0], &ev);
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    if (epoll_wait(ep, &ev, 1, -1) < 0 && errno == EINTR) break;
  }
  printf("eintr\n");
  return 0;
}

static volatile sig_atomic_t g_got = 0, g_marked = 0;

static void on_rt(int sig) {
  (void)sig;
  g_got = g_got + 1;
}

static void on_marker(int sig) {
  (void)sig;
  g_marked = 1;
}

static void* receiver(void* arg) {
  sigset_t* set = arg;
  pthread_sigmask(SIG_UNBLOCK, set, NULL);
  pthread_barrier_wait(&g_ready);
  for (;;) pause();
  return NULL;
}

static int count_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_rt;
  sigaction(SIGRTMIN, &sa, NULL);
  sa.sa_handler = on_marker;
  sigaction(SIGRTMIN + 1, &sa, NULL);
  static sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGRTMIN);
  sigaddset(&set, SIGRTMIN + 1);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  pthread_barrier_init(&g_ready, NULL, 2);
  pthread_t t;
  pthread_create(&t, NULL, receiver, &set);
  pthread_setname_np(t, "receiver");
  pthread_barrier_wait(&g_ready);
  printf("ready\n");
  fflush(stdout);
  char c;
  while (read(0, &c, 1) == 1 && c != '\n') {
  }
  /* A marker after every SIGRTMIN sent so far: once it is handled, so is
   * each of them that was not lost. */
  pthread_kill(t, SIGRTMIN + 1);
  while (!g_marked) usleep(1000);
  printf("got %d\n", (int)g_got);
  return 0;
}

int main(int argc, char** argv) {
  if (pipe(g_pipe) != 0) return 1;
  if (argc > 1 && strcmp(argv[1], "rtsig") == 0) return count_signals();
  if (argc > 1 && strcmp(argv[1], "stopcont") == 0) return wait_through_stop();
  if (argc > 1 && strcmp(argv[1], "term") == 0) return serve_until_term();
  int with_vfork = argc > 1 && strcmp(argv[1], "vfork") == 0 ? (argc > 2 ? atoi(argv[2]) : 1) : 0;
  if (with_vfork < 0 || with_vfork > 8) return 1;
  int busy = argc > 1 && strcmp(argv[1], "busy") == 0 ? 3 : 0;
  static sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  /* Blocked in every thread (inherited): only sigwait collects SIGUSR1. */
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  pthread_barrier_init(&g_ready, NULL, 5 + with_vfork + busy);
  pthread_t t[4 + 8];
  pthread_create(&t[0], NULL, poller, NULL);
  pthread_create(&t[1], NULL, sleeper, NULL);
  pthread_create(&t[2], NULL, epoller, NULL);
  pthread_create(&t[3], NULL, waiter, &set);
  pthread_setname_np(t[0], "poller");
  pthread_setname_np(t[1], "sleeper");
  pthread_setname_np(t[2], "epoller");
  pthread_setname_np(t[3], "sigwaiter");
  for (int i = 0; i < with_vfork; ++i) {
    pthread_create(&t[4 + i], NULL, vforker, NULL);
    pthread_setname_np(t[4 + i], "vforker");
  }
  if (busy) {
    pthread_create(&t[4], NULL, futexer, NULL);
    pthread_create(&t[5], NULL, spinner, NULL);
    pthread_setname_np(t[4], "futexer");
    pthread_setname_np(t[5], "spinner");
    pthread_create(&t[6], NULL, untabled, NULL);
    pthread_setname_np(t[6], "untabled");
  }
  pthread_barrier_wait(&g_ready);
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}
