/* A known call chain for the aarch64 tests: main -> outer -> middle -> leaf,
 * which writes through a null pointer. Built at -O2 without frame pointers,
 * with and without -mbranch-protection=standard; noinline and the volatile
 * sink keep every frame. argv[1] "abort" aborts in the leaf instead, "thread"
 * crashes in a second thread while two more wait, "handler" crashes in a
 * SIGUSR1 handler (the unwind crosses the signal trampoline), "fpsimd"
 * faults with known values in v0, v31, fpcr and fpsr (for the minidump). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile int sink;
static int mode;

/* The fault itself in the asm, so nothing between the writes and the fault
 * changes the registers: v0 all 0x5a, v31 0xff00... in both halves, fpcr
 * rounding towards zero, fpsr's inexact flag. */
static void fpsimd_fault(int *p) {
  __asm__ volatile(
      "movi v0.16b, #0x5a\n\t"
      "movi v31.2d, #0xff00ff00ff00ff00\n\t"
      "mov x9, #0xc00000\n\t"
      "msr fpcr, x9\n\t"
      "mov x9, #0x10\n\t"
      "msr fpsr, x9\n\t"
      "str wzr, [%0]\n\t" ::"r"(p)
      : "x9", "v0", "v31", "memory");
}

__attribute__((noinline)) void chain_leaf(int *p) {
  if (mode == 1) abort();
  if (mode == 2) fpsimd_fault(p);
  *p = 42;
  sink++;
}

__attribute__((noinline)) void chain_middle(int *p) {
  chain_leaf(p);
  sink++;
}

__attribute__((noinline)) void chain_outer(int *p) {
  chain_middle(p);
  sink++;
}

static void *waiter(void *arg) {
  (void)arg;
  for (;;) pause();
  return 0;
}

static void *crasher(void *arg) {
  chain_outer((int *)arg);
  return 0;
}

__attribute__((noinline)) void on_usr1(int sig) {
  (void)sig;
  chain_outer((int *)0);
  sink++;
}

__attribute__((noinline)) void send_usr1(void) {
  raise(SIGUSR1);
  sink++;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "handler") == 0) {
    signal(SIGUSR1, on_usr1);
    send_usr1();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "abort") == 0) mode = 1;
  if (argc > 1 && strcmp(argv[1], "fpsimd") == 0) mode = 2;
  if (argc > 1 && strcmp(argv[1], "thread") == 0) {
    pthread_t t[3];
    pthread_create(&t[0], 0, waiter, 0);
    pthread_create(&t[1], 0, waiter, 0);
    sleep(1);
    pthread_create(&t[2], 0, crasher, 0);
    pthread_join(t[2], 0);
    return 0;
  }
  chain_outer((int *)0);
  return 0;
}
