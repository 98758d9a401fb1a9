/* The C side of the interleave test: a C function that calls back into
 * Python, and one that crashes. noinline and frame pointers keep both
 * visible as frames of their own. */
#include <unistd.h>

__attribute__((noinline)) void fl_call_back(void (*cb)(void)) {
  cb();
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}

__attribute__((noinline)) void fl_crash_now(void) {
  *(volatile int*)0 = 42;
}

/* For a thread that waits in C, called from Python: fl_block() says so
 * (fl_blocked() turns true) and never returns. */
static volatile int fl_is_blocked;

__attribute__((noinline)) void fl_block(void) {
  fl_is_blocked = 1;
  for (;;) pause();
}

int fl_blocked(void) { return fl_is_blocked; }
