/* Calls that leave the first frame without unwind information, built -O2
 * without frame pointers: main -> dispatch -> apply -> (*f)() with f null,
 * 0x1, garbage, or code that was unmapped (freed JIT code), and a leaf in a
 * library built without unwind tables. The unwinder must keep every caller;
 * gdb on the core file is the oracle. Usage: fnptr MODE [LIB] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NOINLINE __attribute__((noinline))

typedef int (*fn_t)(int*);
volatile int g_sink;
volatile uintptr_t g_target;

NOINLINE int apply(fn_t f, int* arg) {
  int r = f(arg);
  g_sink = r; /* keeps the call from being a tail call */
  return r + 1;
}

NOINLINE int dispatch(fn_t f, int* arg) {
  int r = apply(f, arg);
  g_sink = r;
  return r + 2;
}

static fn_t pick(const char* mode, const char* lib) {
  if (!strcmp(mode, "null")) return (fn_t)g_target;
  if (!strcmp(mode, "one")) return (fn_t)(g_target + 1);
  if (!strcmp(mode, "garbage")) return (fn_t)(g_target + 0x5ead0000dead0ull);
  if (!strcmp(mode, "freed-jit")) {
    /* mov $42,%eax; ret -- mapped, made executable, then unmapped. */
    static const unsigned char code[] = {0xb8, 42, 0, 0, 0, 0xc3};
    void* p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memcpy(p, code, sizeof code);
    mprotect(p, 4096, PROT_READ | PROT_EXEC);
    fn_t f = (fn_t)p;
    g_sink = f(NULL);
    munmap(p, 4096);
    return f;
  }
  if (!strcmp(mode, "no-unwind-info")) {
    void* h = dlopen(lib, RTLD_NOW);
    if (!h) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      exit(3);
    }
    return (fn_t)dlsym(h, "nounwind_read");
  }
  fprintf(stderr, "unknown mode %s\n", mode);
  exit(2);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fnptr null|one|garbage|freed-jit|no-unwind-info [LIB]\n");
    return 2;
  }
  fn_t f = pick(argv[1], argc > 2 ? argv[2] : "");
  g_sink = dispatch(f, NULL);
  return 0;
}
