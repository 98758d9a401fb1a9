/* Test programs: each mode crashes one way. Built with -O1 -g so gdb's
 * backtrace of the core file can be compared with the report. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

volatile int g_zero = 0;
volatile int g_sink;

NOINLINE int null_read(void) { return *(volatile int*)(g_zero ? (int*)&g_sink : NULL); }

NOINLINE void ro_write(void) {
  char* p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ((volatile char*)p)[16] = 1;
}

typedef void (*fn_t)(void);
NOINLINE void bad_fnptr(void) {
  fn_t f = (fn_t)(uintptr_t)(0xdead0000 + g_zero);
  f();
  g_sink = 1; /* keeps the call from being a tail call */
}

NOINLINE void do_abort(void) { abort(); }

static void own_handler(int sig) {
  (void)sig;
  static const char msg[] = "own handler ran\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(3);
}

NOINLINE int div_zero(void) { return 42 / g_zero; }

NOINLINE void ud2(void) { __asm__ volatile("ud2"); }

NOINLINE void do_sigbus(void) { raise(SIGBUS); }

NOINLINE void do_trap(void) { __asm__ volatile("int3"); }

NOINLINE int recurse(int n) {
  volatile char pad[256];
  pad[0] = (char)n;
  return recurse(n + 1) + pad[0];
}

NOINLINE void dlopen_crash(const char* lib) {
  void* h = dlopen(lib, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    exit(3);
  }
  void (*f)(int) = (void (*)(int))dlsym(h, "crashlib_crash");
  f(3);
  g_sink = 1;
}

NOINLINE void level3(const char* mode, const char* arg) {
  if (!strcmp(mode, "null-read")) g_sink = null_read();
  else if (!strcmp(mode, "ro-write")) ro_write();
  else if (!strcmp(mode, "bad-fnptr")) bad_fnptr();
  else if (!strcmp(mode, "abort")) do_abort();
  else if (!strcmp(mode, "div-zero")) g_sink = div_zero();
  else if (!strcmp(mode, "ud2")) ud2();
  else if (!strcmp(mode, "sigbus")) do_sigbus();
  else if (!strcmp(mode, "trap")) do_trap();
  else if (!strcmp(mode, "stack-overflow")) g_sink = recurse(0);
  else if (!strcmp(mode, "dlopen")) dlopen_crash(arg);
  else if (!strcmp(mode, "exit0")) exit(0);
  else if (!strcmp(mode, "own-handler")) {
    /* Like a runtime that handles SIGSEGV itself and never chains. */
    signal(SIGSEGV, own_handler);
    g_sink = null_read();
  }
  else {
    fprintf(stderr, "unknown mode %s\n", mode);
    exit(2);
  }
  g_sink = 2;
}
NOINLINE void level2(const char* mode, const char* arg) { level3(mode, arg); g_sink = 3; }
NOINLINE void level1(const char* mode, const char* arg) { level2(mode, arg); g_sink = 4; }

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: crasher MODE [ARG]\n");
    return 2;
  }
  level1(argv[1], argc > 2 ? argv[2] : "");
  return 0;
}
