/* Races around the dump signal's helper dump (faultline preloaded with
 * FAULTLINE_DUMP=1):
 *   envrace N   a thread rewrites the environment without pause (clearenv,
 *               setenv) while another is sent the dump signal N times:
 *               "survived N dumps"
 *   nested MS   the main thread asks faultline_dump_now(); MS ms later
 *               another thread sends the dump signal to the main thread; a
 *               third thread waits in poll(), which is never restarted:
 *               "dump_now RC eintr N"
 *   reaper MS   a child subreaper with SIGSEGV and SIGCHLD handlers sends
 *               the dump signal to a thread in read(), and MS ms later
 *               raises SIGSEGV (its own handler takes it, so the dump is
 *               given up for a crash): "sigchld N waitpid R" */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_pipe[2];
static volatile pid_t g_tid;
static volatile int g_eintr, g_done, g_sigchld;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void* churn(void* arg) {
  (void)arg;
  char name[32];
  for (;;) {
    clearenv();
    for (int k = 0; k < 40; ++k) {
      snprintf(name, sizeof name, "V%d", k);
      setenv(name, "some value here", 1);
    }
  }
  return NULL;
}

static void* idle(void* arg) {
  (void)arg;
  g_tid = (pid_t)syscall(SYS_gettid);
  for (;;) pause();
  return NULL;
}

static void* poller(void* arg) {
  (void)arg;
  struct pollfd p = {g_pipe[0], POLLIN, 0};
  while (!g_done) {
    int r = poll(&p, 1, -1);
    if (r < 0 && errno == EINTR) g_eintr++;
    if (r > 0) break;
  }
  return NULL;
}

static void* sender(void* arg) {
  sleep_ms(*(int*)arg);
  syscall(SYS_tgkill, getpid(), g_tid, SIGUSR2);
  return NULL;
}

static void* reader(void* arg) {
  (void)arg;
  g_tid = (pid_t)syscall(SYS_gettid);
  char c;
  while (read(g_pipe[0], &c, 1) != 0) {
  }
  return NULL;
}

static void on_segv(int signo) {
  (void)signo;
}
static void on_chld(int signo) {
  (void)signo;
  g_sigchld++;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int arg = argc > 2 ? atoi(argv[2]) : 5;
  pthread_t t1, t2;
  if (pipe(g_pipe) != 0) return 90;
  if (!strcmp(mode, "envrace")) {
    pthread_create(&t2, NULL, idle, NULL);
    while (!g_tid) sleep_ms(1);
    pthread_create(&t1, NULL, churn, NULL);
    for (int i = 0; i < arg; ++i) {
      syscall(SYS_tgkill, getpid(), g_tid, SIGUSR2);
      sleep_ms(20);
    }
    printf("survived %d dumps\n", arg);
    fflush(stdout);
    _exit(0);
  } else if (!strcmp(mode, "nested")) {
    int (*dump_now)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "faultline_dump_now");
    if (!dump_now) return 91;
    g_tid = (pid_t)syscall(SYS_gettid);
    pthread_create(&t1, NULL, poller, NULL);
    sleep_ms(20);
    pthread_create(&t2, NULL, sender, &arg);
    int rc = dump_now();
    pthread_join(t2, NULL);
    sleep_ms(200);
    g_done = 1;
    if (write(g_pipe[1], "x", 1) != 1) return 92;
    pthread_join(t1, NULL);
    printf("dump_now %d eintr %d\n", rc, g_eintr);
  } else if (!strcmp(mode, "reaper")) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGSEGV, on_segv);
    signal(SIGCHLD, on_chld);
    pthread_create(&t1, NULL, reader, NULL);
    while (!g_tid) sleep_ms(1);
    sleep_ms(20);
    syscall(SYS_tgkill, getpid(), g_tid, SIGUSR2);
    sleep_ms(arg);
    raise(SIGSEGV);
    sleep_ms(2000);
    int status;
    pid_t w = waitpid(-1, &status, WNOHANG);
    printf("sigchld %d waitpid %d\n", g_sigchld, (int)w);
    close(g_pipe[1]);
    pthread_join(t1, NULL);
  } else {
    return 2;
  }
  return 0;
}
