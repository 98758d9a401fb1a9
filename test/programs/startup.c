// What a process holds when main() starts: the heap the C library has set up
// (0 if nothing called malloc yet) and every open descriptor with its target.
// Under the preload, the difference from a plain run is what faultline's
// install took at start-up.
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
  // First, before anything here allocates.
  struct mallinfo2 mi = mallinfo2();
  size_t heap = mi.arena + mi.hblkhd;
  int fds[256];
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 2;
  int own = dirfd(d);
  for (struct dirent* e; (e = readdir(d)) != NULL && n < 256;) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd != own) fds[n++] = fd;
  }
  closedir(d);
  printf("heap %zu\n", heap);
  for (int i = 0; i < n; ++i) {
    char path[64], target[4096];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[i]);
    ssize_t len = readlink(path, target, sizeof target - 1);
    target[len > 0 ? len : 0] = '\0';
    printf("fd %d %s\n", fds[i], target);
  }
  return 0;
}
