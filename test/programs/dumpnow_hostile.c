/* faultline_dump_now() where the job makes it hard for its helper (linked to
 * faultline). One mode a run; each prints lines "WHAT RC PATH" (the call's
 * result, the last report) and exits 0 while the job could go on.
 *   seccomp   a "no new processes" sandbox: a seccomp filter kills any
 *             clone without CLONE_THREAD (the dump must not start one)
 *   cancel    a thread, cancelled before it asks, dumps ("first"); then
 *             the main thread ("second"); then "stray N": waitpid(-1,
 *             WNOHANG|__WALL) of any child left behind (0 or -1: none)
 *   forkdump  a thread dumps while the main thread forks; the fork child
 *             dumps ("child", printed by the child) and lives on a while
 *   forkpipe  a thread forks children that live 2 s while the main thread
 *             dumps twice ("dump") */
#define _GNU_SOURCE
#include <errno.h>
#include <faultline/faultline.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char* what, int rc) {
  char path[4096];
  faultline_last_report(path, sizeof path);
  printf("%s %d %s\n", what, rc, path);
  fflush(stdout);
}

static int no_new_processes(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static void* cancelled(void* arg) {
  (void)arg;
  pthread_cancel(pthread_self()); /* acted on at the next cancellation point */
  report("first", faultline_dump_now());
  return NULL;
}

static volatile int g_go;
static void* dumper(void* arg) {
  (void)arg;
  g_go = 1;
  report("parent", faultline_dump_now());
  return NULL;
}

static volatile int g_stop;
static void* forker(void* arg) {
  (void)arg;
  while (!g_stop) {
    pid_t c = fork();
    if (c == 0) {
      sleep(2);
      _exit(0);
    }
    usleep(1000);
  }
  return NULL;
}

int main(int argc, char** argv) {
  faultline_options o;
  faultline_options_init(&o);
  if (faultline_install(&o) != 0) return 90;
  const char* mode = argc > 1 ? argv[1] : "";
  pthread_t t;
  if (!strcmp(mode, "seccomp")) {
    if (no_new_processes() != 0) return 91;
    report("dump", faultline_dump_now());
  } else if (!strcmp(mode, "cancel")) {
    void* res;
    pthread_create(&t, NULL, cancelled, NULL);
    pthread_join(t, &res);
    if (res != PTHREAD_CANCELED) return 92;
    report("second", faultline_dump_now());
    int status;
    printf("stray %d\n", (int)waitpid(-1, &status, WNOHANG | __WALL));
  } else if (!strcmp(mode, "forkdump")) {
    pthread_create(&t, NULL, dumper, NULL);
    while (!g_go) {
    }
    usleep(2000); /* the helper is being started or running */
    pid_t c = fork();
    if (c == 0) {
      report("child", faultline_dump_now());
      sleep(1); /* a worker that lives on */
      _exit(0);
    }
    pthread_join(t, NULL);
    waitpid(c, NULL, 0);
  } else if (!strcmp(mode, "forkpipe")) {
    pthread_create(&t, NULL, forker, NULL);
    for (int i = 0; i < 2; ++i) report("dump", faultline_dump_now());
    g_stop = 1;
    pthread_join(t, NULL);
    while (waitpid(-1, NULL, 0) > 0) {
    }
  } else {
    return 2;
  }
  return 0;
}
