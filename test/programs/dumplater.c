/* A job run under the preload with FAULTLINE_DUMP_AFTER: its threads wait
 * in poll() and nanosleep(), and the job exits non-zero if one of those
 * calls ever fails (EINTR) or returns early, as a program that treats
 * EINTR as an error does.
 *   dumplater DIR        when a report appears in DIR (the timed dump's),
 *                        prints "report NAME" and exits 0
 *   dumplater DIR wait   waits (FAULTLINE_DUMP_AFTER_EXIT=1: faultline
 *                        ends the job with status 1 after the report)
 *   dumplater DIR tolerant  as the first, but a call that fails is only
 *                        counted ("disturbed N" after the report line):
 *                        the dump by signal (FAULTLINE_DUMP_HELPER=0)
 *   dumplater DIR cancel  no other thread: arms faultline_dump_after(60 s)
 *                        and cancels it, then prints "threads N" (N from
 *                        /proc/self/status, once 1 or after 5 s) and
 *                        "unshare 0" or unshare(CLONE_NEWUSER)'s errno
 *   dumplater DIR fired  the same after a dump armed for 100 ms is written
 *                        (without faultline loaded: no arm, the same lines)
 * Gives up after 120 s (status 5). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static int g_pipe[2];
static int g_tolerant = 0;
static int g_disturbed = 0;

static void disturbed(const char* what, int rc, int code) {
  if (g_tolerant) {
    __atomic_add_fetch(&g_disturbed, 1, __ATOMIC_SEQ_CST);
    return;
  }
  fprintf(stderr, "dumplater: %s returned %d: %s\n", what, rc, rc < 0 ? strerror(errno) : "early");
  exit(code);
}

NOINLINE void wait_in_poll(void) {
  struct pollfd p = {g_pipe[0], POLLIN, 0};
  for (;;) disturbed("poll", poll(&p, 1, -1), 2);
}

NOINLINE void wait_in_nanosleep(void) {
  struct timespec ts = {3600, 0};
  for (;;) disturbed("nanosleep", nanosleep(&ts, NULL), 3);
}

static void* poller(void* arg) {
  (void)arg;
  wait_in_poll();
  return NULL;
}

static void* sleeper(void* arg) {
  (void)arg;
  wait_in_nanosleep();
  return NULL;
}

/* The name of a report in dir, or NULL. */
static const char* report_in(const char* dir) {
  static char name[256];
  DIR* d = opendir(dir);
  const char* found = NULL;
  struct dirent* e;
  while (d && (e = readdir(d)) != NULL) {
    if (fnmatch("faultline-*.json", e->d_name, 0) == 0) {
      snprintf(name, sizeof name, "%s", e->d_name);
      found = name;
    }
  }
  if (d) closedir(d);
  return found;
}

/* Threads: of /proc/self/status. */
static int thread_count(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  if (f) fclose(f);
  return n;
}

/* The cancel and fired modes: single-threaded but for faultline's watchdog. */
static int arm_then_unshare(const char* dir, int fire) {
  int (*after)(unsigned, int) = (int (*)(unsigned, int))dlsym(RTLD_DEFAULT, "faultline_dump_after");
  void (*cancel)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "faultline_cancel_dump_after");
  if (after && cancel) {
    if (after(fire ? 100 : 60000, 0) != 0) return 6;
    if (!fire) cancel();
    for (int i = 0; fire && !report_in(dir); ++i) {
      if (i == 12000) return 5;
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  /* The watchdog ends on its own after the dump or the cancel. */
  for (int i = 0; i < 500 && thread_count() != 1; ++i) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  printf("threads %d\n", thread_count());
  printf("unshare %d\n", unshare(CLONE_NEWUSER) == 0 ? 0 : errno);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  if (argc > 2 && (strcmp(argv[2], "cancel") == 0 || strcmp(argv[2], "fired") == 0))
    return arm_then_unshare(argv[1], strcmp(argv[2], "fired") == 0);
  int wait_only = argc > 2 && strcmp(argv[2], "wait") == 0;
  g_tolerant = argc > 2 && strcmp(argv[2], "tolerant") == 0;
  if (pipe(g_pipe) != 0) return 6;
  pthread_t t;
  pthread_create(&t, NULL, poller, NULL);
  pthread_setname_np(t, "poller");
  pthread_create(&t, NULL, sleeper, NULL);
  pthread_setname_np(t, "sleeper");
  /* Main waits too, in 10 ms naps, each of which must sleep its full time. */
  for (int i = 0; i < 12000; ++i) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    if (nanosleep(&ts, NULL) != 0) disturbed("main's nanosleep", -1, 4);
    const char* name = wait_only ? NULL : report_in(argv[1]);
    if (name) {
      printf("report %s\n", name);
      if (g_tolerant) printf("disturbed %d\n", __atomic_load_n(&g_disturbed, __ATOMIC_SEQ_CST));
      return 0;
    }
  }
  return 5;
}
