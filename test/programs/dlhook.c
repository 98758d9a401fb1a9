/* Loads libraries late, as Python imports extensions.
 *   dlhook crash LIB [again]: dlopen(LIB) (libcrashlib.so), with "again"
 *     one more dlopen (of a library already loaded), then crash inside LIB.
 *   dlhook runpath OUTER: dlopen(OUTER), whose dlopen_inner() loads a
 *     library found only through OUTER's RUNPATH ($ORIGIN/dlo); prints
 *     "inner N" or "inner not found". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  if (strcmp(argv[1], "runpath") == 0) {
    int (*inner)(void) = (int (*)(void))dlsym(h, "dlopen_inner");
    if (!inner) return 2;
    int n = inner();
    if (n < 0) {
      printf("inner not found\n");
    } else {
      printf("inner %d\n", n);
    }
    return 0;
  }
  if (argc > 3 && strcmp(argv[3], "again") == 0 && !dlopen("libc.so.6", RTLD_NOW)) return 2;
  void (*crash)(int) = (void (*)(int))dlsym(h, "crashlib_crash");
  if (!crash) return 2;
  crash(1);
  return 0;
}
