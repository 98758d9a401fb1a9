/* The C side of the interleave test: a C function that calls back into
 * Python, and one that crashes. noinline and frame pointers keep both
 * visible as frames of their own. */
__attribute__((noinline)) void fl_call_back(void (*cb)(void)) {
  cb();
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}

__attribute__((noinline)) void fl_crash_now(void) {
  *(volatile int*)0 = 42;
}
