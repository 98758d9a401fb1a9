/* A healthy job asked for live dumps by the dump signal (started with
 * FAULTLINE_DUMP=1, faultline preloaded): threads wait in poll(),
 * epoll_wait() and nanosleep() and count each time their call is cut short
 * (EINTR) before they wait again; the main thread reads commands from stdin
 * and masks nothing.
 * With SIGWAITERS_CRASH_FIFO set, one more thread opens that FIFO and
 * crashes (a null write) as soon as a byte comes: a crash during a dump.
 * Prints "ready", then reads commands, one a line:
 *   check  -> "eintr POLL EPOLL SLEEP" (the counts so far)
 *   quit   -> exit 0 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static int g_pipe[2];
static pthread_barrier_t g_ready;
static volatile int g_eintr[3];  // poll, epoll_wait, nanosleep

static void count(int which, int rc) {
  if (rc < 0 && errno == EINTR) {
    __atomic_add_fetch(&g_eintr[which], 1, __ATOMIC_SEQ_CST);
    return;
  }
  fprintf(stderr, "sigwaiters: waiter %d returned %d\n", which, rc);
  exit(2);
}

NOINLINE void wait_in_poll(void) {
  struct pollfd p = {g_pipe[0], POLLIN, 0};
  for (;;) count(0, poll(&p, 1, -1));
}

NOINLINE void wait_in_epoll(int ep) {
  struct epoll_event ev;
  for (;;) count(1, epoll_wait(ep, &ev, 1, -1));
}

NOINLINE void wait_in_nanosleep(void) {
  for (;;) {
    struct timespec ts = {3600, 0};
    count(2, nanosleep(&ts, NULL));
  }
}

static void* poller(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  wait_in_poll();
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

static void* sleeper(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  wait_in_nanosleep();
  return NULL;
}

NOINLINE void crash_when_told(int fd) {
  char c;
  while (read(fd, &c, 1) != 1) {
  }
  *(volatile int*)0 = 1;
}

static void* crasher(void* arg) {
  int fd = open((const char*)arg, O_RDWR);  // O_RDWR: no wait for a writer
  pthread_barrier_wait(&g_ready);
  if (fd >= 0) crash_when_told(fd);
  return NULL;
}

int main(void) {
  const char* fifo = getenv("SIGWAITERS_CRASH_FIFO");
  if (pipe(g_pipe) != 0) return 7;
  void* (*fns[])(void*) = {poller, epoller, sleeper, crasher};
  int n = fifo ? 4 : 3;
  pthread_barrier_init(&g_ready, NULL, n + 1);
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, fns[i], (void*)fifo) != 0) return 7;
    static const char* const names[] = {"poller", "epoller", "sleeper", "crasher"};
    pthread_setname_np(t, names[i]);
  }
  pthread_barrier_wait(&g_ready);
  printf("ready\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (strcmp(line, "check\n") == 0) {
      printf("eintr %d %d %d\n", g_eintr[0], g_eintr[1], g_eintr[2]);
      fflush(stdout);
    } else if (strcmp(line, "quit\n") == 0) {
      return 0;
    }
  }
  return 0;
}
