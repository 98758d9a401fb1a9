// What a process holds when main() starts: the heap the C library has set up
// (0 if nothing called malloc yet) and every open descriptor with its target.
// Under the preload, the difference from a plain run is what faultline's
// install took at start-up.
//
// `startup pages`: the pages of faultline's memory (its mappings and the
// zero-filled part after them) written in main() and, after a fork, in the
// child (Private_Dirty of /proc/self/smaps: a page shared with the parent
// until the child writes it).
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// kB written in the writable mappings whose path names libfaultline, and in
// the anonymous mapping right after the last of them (its .bss).
static long faultline_dirty_kb(void) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[4096];
  long kb = 0;
  int in_lib = 0, after_lib = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) == 3 &&
        path_at > 0) {
      const char* path = line + path_at;
      // Writable ones only: a freshly built library's page-cache pages are
      // counted dirty in its read-only mappings too, until written back.
      int ours = strstr(path, "libfaultline") != NULL;
      int anon = path[0] == '\n' || path[0] == '\0';
      in_lib = perms[1] == 'w' && (ours || (after_lib && anon));
      after_lib = ours;
      continue;
    }
    long v;
    if (in_lib && sscanf(line, "Private_Dirty: %ld kB", &v) == 1) kb += v;
  }
  fclose(f);
  return kb;
}

static int pages(void) {
  printf("main %ld\n", faultline_dirty_kb());
  fflush(stdout);
  // A first fork, so that what the parent's own fork handlers write (a
  // lazily bound call's GOT entry) is written before the child counted.
  pid_t warm = fork();
  if (warm == 0) _exit(0);
  int status = 0;
  waitpid(warm, &status, 0);
  pid_t child = fork();
  if (child == 0) {
    printf("child %ld\n", faultline_dirty_kb());
    fflush(stdout);
    _exit(0);
  }
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "pages") == 0) return pages();
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
