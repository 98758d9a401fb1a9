/* fork while another thread loads and unloads a library and starts threads
 * (each pthread_create refreshes faultline's module snapshot). Every child
 * then starts a thread of its own: it must not hang on state the parent's
 * other thread held at the fork. A child that does hang is ended by its
 * alarm. With "crash", a last child then crashes in child_crash (its report
 * must name it). Usage: forkrefresh LIB FORKS [crash]; prints "ok" or names
 * the hung child. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void* noop(void* arg) {
  return arg;
}

static void* churn(void* lib) {
  for (;;) {
    void* h = dlopen((const char*)lib, RTLD_NOW);
    pthread_t t;
    if (pthread_create(&t, NULL, noop, NULL) == 0) pthread_join(t, NULL);
    if (h) dlclose(h);
  }
  return NULL;
}

volatile int* volatile g_null;

__attribute__((noinline)) void child_crash(void) {
  *g_null = 1;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int forks = atoi(argv[2]);
  pthread_t a;
  if (pthread_create(&a, NULL, churn, argv[1]) != 0) return 2;
  for (int i = 0; i < forks; ++i) {
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      alarm(60); /* a hang detector, far beyond the microseconds this takes */
      pthread_t t;
      if (pthread_create(&t, NULL, noop, NULL) == 0) pthread_join(t, NULL);
      _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return 2;
    if (WIFSIGNALED(st)) {
      printf("child %d of %d hung (signal %d)\n", i, forks, WTERMSIG(st));
      return 1;
    }
  }
  if (argc > 3) {
    pid_t pid = fork();
    if (pid == 0) {
      pthread_t t;
      if (pthread_create(&t, NULL, noop, NULL) == 0) pthread_join(t, NULL);
      child_crash();
      _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return 2;
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV) {
      printf("the crashing child ended with status %d\n", st);
      return 1;
    }
  }
  printf("ok\n");
  return 0;
}
