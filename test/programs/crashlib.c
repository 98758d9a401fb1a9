/* A library the crasher dlopens; it crashes three calls deep. */
#define NOINLINE __attribute__((noinline))
volatile int* volatile crashlib_target = 0;
volatile int crashlib_sink;
NOINLINE void crashlib_inner(int n) { *crashlib_target = n; }
NOINLINE void crashlib_middle(int n) { crashlib_inner(n + 1); crashlib_sink = 1; }
void crashlib_crash(int n) { crashlib_middle(n); crashlib_sink = 2; }
