/* A C program (no C++ runtime at start) that loads a C++ library late,
 * with RTLD_LOCAL as Python loads its extensions, starts a thread, then
 * calls into the library, which throws an exception nobody catches.
 * Usage: latecxx LIB [thread] (without "thread" no pthread_create runs
 * between the load and the throw). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void* noop(void* arg) {
  return arg;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  if (argc > 2 && strcmp(argv[2], "thread") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, noop, NULL) != 0) return 2;
    pthread_join(t, NULL);
  }
  void (*throw_late)(void) = (void (*)(void))dlsym(h, "throw_late");
  if (!throw_late) return 2;
  throw_late();
  return 0;
}
