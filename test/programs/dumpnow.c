/* A job that asks for its own live dump with faultline_dump_now() while its
 * other threads wait in poll(), nanosleep() and epoll_wait(); each exits
 * non-zero if its call ever fails (EINTR) or returns early.
 *   dumpnow            (linked to faultline, installed through the C API)
 *   dumpnow tolerant   (the waiters count what disturbs them and wait again:
 *                       bench/dump_now_bench.py)
 * A SIGCHLD handler counts the signals it gets, and a reaper thread waits in
 * waitpid(-1) for any child (the job has one of its own, asleep, so that the
 * wait blocks): neither may see the dump's helper.
 * Prints "ready", then reads commands, one a line:
 *   dump   -> "dump RC PATH NS" (faultline_dump_now()'s result, the last
 *             report, how long the call took)
 *   dump2  -> "dump2 RC1 PATH1 RC2 PATH2" (two new threads call it at once;
 *             each path is the last report when that thread looked)
 *   check  -> "sigchld N reaped M disturbed K" (what the program saw)
 *   quit   -> exit 0 */
#define _GNU_SOURCE
#include <errno.h>
#include <faultline/faultline.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static int g_pipe[2];
static pthread_barrier_t g_ready;
static volatile sig_atomic_t g_sigchld = 0;
static volatile int g_reaped = 0;
static int g_tolerant = 0;
static volatile int g_disturbed = 0;

static void disturbed(const char* what, int rc, int code) {
  if (g_tolerant) {
    __atomic_add_fetch(&g_disturbed, 1, __ATOMIC_SEQ_CST);
    return;
  }
  fprintf(stderr, "dumpnow: %s returned %d: %s\n", what, rc, rc < 0 ? strerror(errno) : "early");
  exit(code);
}

NOINLINE void wait_in_poll(void) {
  struct pollfd p = {g_pipe[0], POLLIN, 0};
  for (;;) {
    int rc = poll(&p, 1, -1);
    disturbed("poll", rc, 2);
  }
}

NOINLINE void wait_in_nanosleep(void) {
  struct timespec ts = {3600, 0};
  for (;;) {
    int rc = nanosleep(&ts, NULL);
    disturbed("nanosleep", rc, 3);
  }
}

NOINLINE void wait_in_epoll(int ep) {
  struct epoll_event ev;
  for (;;) {
    int rc = epoll_wait(ep, &ev, 1, -1);
    disturbed("epoll_wait", rc, 4);
  }
}

NOINLINE void reap_any(void) {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid > 0) {
      __atomic_add_fetch(&g_reaped, 1, __ATOMIC_SEQ_CST);
      fprintf(stderr, "dumpnow: reaped %d\n", (int)pid);
    } else if (errno != EINTR) {
      disturbed("waitpid(-1)", pid, 6);
    }
  }
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

static void* reaper(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_ready);
  reap_any();
  return NULL;
}

static volatile int g_sigchld_pid = 0, g_sigchld_code = 0;

struct Asked {
  pthread_barrier_t* together;
  int rc;
  char path[4096];
};

static void* ask_dump(void* arg) {
  struct Asked* a = arg;
  pthread_barrier_wait(a->together);
  a->rc = faultline_dump_now();
  faultline_last_report(a->path, sizeof a->path);
  return NULL;
}

static void on_sigchld(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)uc;
  g_sigchld = g_sigchld + 1;
  g_sigchld_pid = si->si_pid;
  g_sigchld_code = si->si_code;
}

int main(int argc, char** argv) {
  g_tolerant = argc > 1 && strcmp(argv[1], "tolerant") == 0;
  faultline_options o;
  faultline_options_init(&o);
  o.write_stderr = 0;
  if (faultline_install(&o) != 0) return 7;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigaction(SIGCHLD, &sa, NULL);
  /* A child of the job's own, so that waitpid(-1) blocks. */
  pid_t own = fork();
  if (own == 0) {
    /* Holds none of the job's pipes, and goes with it. */
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pause();
    _exit(0);
  }
  if (pipe(g_pipe) != 0) return 7;
  pthread_barrier_init(&g_ready, NULL, 5);
  pthread_t t[4];
  void* (*fns[4])(void*) = {poller, sleeper, epoller, reaper};
  const char* names[4] = {"poller", "sleeper", "epoller", "reaper"};
  for (int i = 0; i < 4; ++i) {
    pthread_create(&t[i], NULL, fns[i], NULL);
    pthread_setname_np(t[i], names[i]);
  }
  pthread_barrier_wait(&g_ready);
  /* Let them reach their calls. */
  struct timespec settle = {0, 100 * 1000 * 1000};
  nanosleep(&settle, NULL);
  printf("ready\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "dump2", 5) == 0) {
      pthread_barrier_t together;
      pthread_barrier_init(&together, NULL, 2);
      struct Asked a[2] = {{&together, 0, ""}, {&together, 0, ""}};
      pthread_t th[2];
      for (int i = 0; i < 2; ++i) pthread_create(&th[i], NULL, ask_dump, &a[i]);
      for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
      printf("dump2 %d %s %d %s\n", a[0].rc, a[0].path, a[1].rc, a[1].path);
    } else if (strncmp(line, "dump", 4) == 0) {
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      int rc = faultline_dump_now();
      clock_gettime(CLOCK_MONOTONIC, &t1);
      long long ns = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
      char path[4096] = "";
      faultline_last_report(path, sizeof path);
      printf("dump %d %s %lld\n", rc, path, ns);
    } else if (strncmp(line, "check", 5) == 0) {
      printf("sigchld %d reaped %d disturbed %d\n", (int)g_sigchld,
             __atomic_load_n(&g_reaped, __ATOMIC_SEQ_CST),
             __atomic_load_n(&g_disturbed, __ATOMIC_SEQ_CST));
      if (g_sigchld)
        fprintf(stderr, "dumpnow: SIGCHLD from %d, code %d\n", g_sigchld_pid, g_sigchld_code);
    } else if (strncmp(line, "quit", 4) == 0) {
      kill(own, SIGKILL);
      return 0;
    }
    fflush(stdout);
  }
  kill(own, SIGKILL);
  return 0;
}
