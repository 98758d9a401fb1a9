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
 *   forkpipe  the main thread dumps twice ("dump"); each time, while the
 *             helper's output pipe is open in the process (at faultline's
 *             call of clone(), interposed here), another thread forks a
 *             child that keeps a copy of the pipe's write end until both
 *             dumps are over */
#define _GNU_SOURCE
#include <errno.h>
#include <faultline/faultline.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <dlfcn.h>
#include <sched.h>
#include <stdarg.h>
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

/* forkpipe: faultline starts its helper with libc's clone() while the
 * pipe it reads the helper's output from is open with both ends; this
 * program's clone() asks the forker thread for a child at that moment (a
 * fork of another thread's, which faultline cannot prevent) and waits until
 * the child exists. The children live until both dumps are over: a dump
 * that waited for the end of the pipe would wait for them. */
typedef int (*clone_fn)(int (*)(void*), void*, int, void*, ...);
static clone_fn g_real_clone;
static volatile int g_fork_asked, g_forked, g_stop;
static int g_hold[2] = {-1, -1}; /* the children wait for its end */

int clone(int (*fn)(void*), void* stack, int flags, void* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  void* ptid = va_arg(ap, void*);
  void* tls = va_arg(ap, void*);
  void* ctid = va_arg(ap, void*);
  va_end(ap);
  /* faultline's first clone (CLONE_VM, no exit signal), not the stand-by
   * child's own (CLONE_VFORK), which runs on this thread's data. */
  if (g_hold[1] >= 0 && flags == CLONE_VM) {
    int asked = __atomic_add_fetch(&g_fork_asked, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&g_forked, __ATOMIC_SEQ_CST) < asked) {
    }
  }
  return g_real_clone(fn, stack, flags, arg, ptid, tls, ctid);
}

static void* forker(void* arg) {
  (void)arg;
  int done = 0;
  while (!g_stop) {
    if (__atomic_load_n(&g_fork_asked, __ATOMIC_SEQ_CST) == done) continue;
    pid_t c = fork();
    if (c == 0) {
      char b;
      close(g_hold[1]);
      while (read(g_hold[0], &b, 1) < 0 && errno == EINTR) {
      }
      _exit(0);
    }
    __atomic_store_n(&g_forked, ++done, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

int main(int argc, char** argv) {
  faultline_options o;
  faultline_options_init(&o);
  if (faultline_install(&o) != 0) return 90;
  const char* mode = argc > 1 ? argv[1] : "";
  g_real_clone = (clone_fn)dlsym(RTLD_NEXT, "clone");
  if (!g_real_clone) return 94;
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
    if (pipe(g_hold) != 0) return 93;
    pthread_create(&t, NULL, forker, NULL);
    for (int i = 0; i < 2; ++i) report("dump", faultline_dump_now());
    g_stop = 1;
    pthread_join(t, NULL);
    printf("forked %d\n", g_forked);
    close(g_hold[1]);
    while (waitpid(-1, NULL, 0) > 0) {
    }
  } else {
    return 2;
  }
  return 0;
}
