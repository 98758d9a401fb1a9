/* A worker crashes beside threads that must not notice faultline (the first
 * law: the job ends as it would have without it).
 *   firstlaw MODE
 * Modes:
 *   sleep-main   main does sleep(5); return 0 while a worker crashes
 *   waiters      threads in poll, epoll_wait, select and nanosleep, each
 *                treating a failure (EINTR) as fatal (exit 2..5); a worker
 *                crashes
 *   sigwait      a daemon: every asynchronous signal blocked, one thread
 *                collects them with sigwait() and exits 0 on any; a worker
 *                crashes
 *   sigwait-hang the same, its set without the thread-dump signal (SIGRTMAX-3),
 *                linked faultline installed with a crash callback that never
 *                returns (the watchdog must end it) */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "faultline/faultline.h"

#define NOINLINE __attribute__((noinline))

static volatile int* volatile g_null;
static int g_pipe[2];
static pthread_barrier_t g_ready;

NOINLINE static void crash_now(void) {
  *g_null = 1;
}

static void* crasher(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  /* Let the others enter their blocking calls. */
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  crash_now();
  return NULL;
}

static void fatal(const char* what, int code) {
  fprintf(stderr, "%s failed: %s\n", what, strerror(errno));
  exit(code);
}

static void* in_poll(void* arg) {
  (void)arg;
  struct pollfd p = {g_pipe[0], POLLIN, 0};
  pthread_barrier_wait(&g_ready);
  if (poll(&p, 1, -1) < 0) fatal("poll", 2);
  exit(0);
}

static void* in_epoll(void* arg) {
  (void)arg;
  int ep = epoll_create1(0);
  struct epoll_event ev = {EPOLLIN, {0}};
  epoll_ctl(ep, EPOLL_CTL_ADD, g_pipe[0], &ev);
  pthread_barrier_wait(&g_ready);
  if (epoll_wait(ep, &ev, 1, -1) < 0) fatal("epoll_wait", 3);
  exit(0);
}

static void* in_select(void* arg) {
  (void)arg;
  fd_set r;
  FD_ZERO(&r);
  FD_SET(g_pipe[0], &r);
  pthread_barrier_wait(&g_ready);
  if (select(g_pipe[0] + 1, &r, NULL, NULL, NULL) < 0) fatal("select", 4);
  exit(0);
}

static void* in_nanosleep(void* arg) {
  (void)arg;
  struct timespec ts = {30, 0};
  pthread_barrier_wait(&g_ready);
  if (nanosleep(&ts, NULL) < 0) fatal("nanosleep", 5);
  exit(0);
}

static void* collector(void* arg) {
  sigset_t* all = arg;
  int sig = 0;
  pthread_barrier_wait(&g_ready);
  sigwait(all, &sig);
  printf("signal %d: shutting down\n", sig);
  exit(0);
}

static void hang(faultline_callback_writer* w, void* data) {
  (void)w;
  (void)data;
  for (;;) pause();
}

static void start(void* (*fn)(void*), void* arg) {
  pthread_t t;
  pthread_create(&t, NULL, fn, arg);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (pipe(g_pipe) != 0) return 1;
  if (!strcmp(mode, "sleep-main")) {
    pthread_barrier_init(&g_ready, NULL, 2);
    start(crasher, NULL);
    pthread_barrier_wait(&g_ready);
    sleep(5);
    return 0;
  }
  if (!strcmp(mode, "waiters")) {
    pthread_barrier_init(&g_ready, NULL, 6);
    start(in_poll, NULL);
    start(in_epoll, NULL);
    start(in_select, NULL);
    start(in_nanosleep, NULL);
    start(crasher, NULL);
    pthread_barrier_wait(&g_ready);
    struct pollfd p = {g_pipe[0], POLLIN, 0};
    if (poll(&p, 1, -1) < 0) fatal("main poll", 6);
    return 0;
  }
  if (!strcmp(mode, "sigwait") || !strcmp(mode, "sigwait-hang")) {
    if (!strcmp(mode, "sigwait-hang")) {
      faultline_options o;
      faultline_options_init(&o);
      o.callback = hang;
      o.watchdog_seconds = 2;
      if (faultline_install(&o) != 0) return 1;
    }
    static sigset_t all;
    sigfillset(&all);
    static const int kSync[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};
    for (size_t i = 0; i < sizeof kSync / sizeof kSync[0]; ++i) sigdelset(&all, kSync[i]);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    /* Hung: only the watchdog's SIGALRM could end it, were it taken here. */
    if (!strcmp(mode, "sigwait-hang")) sigdelset(&all, SIGRTMAX - 3);
    pthread_barrier_init(&g_ready, NULL, 3);
    start(collector, &all);
    start(crasher, NULL);
    pthread_barrier_wait(&g_ready);
    for (;;) pause();
  }
  fprintf(stderr, "usage: firstlaw sleep-main|waiters|sigwait|sigwait-hang\n");
  return 64;
}
