/* The "untabled" thread of `dumpwait busy`, compiled with frame pointers and
 * no unwind tables (no .eh_frame entry; test/programs/CMakeLists.txt): the
 * CFI unwinder stops in it and the frame-pointer chain goes on, as with code
 * built without tables. gdb still unwinds it from -g's .debug_frame. */
#include <stdint.h>

__attribute__((noinline)) uint64_t spin_without_unwind_tables(volatile int* stop) {
  volatile uint64_t acc[4] = {0, 0, 0, 0};
  uint64_t x = 1;
  while (!*stop) {
    x = x * 6364136223846793005ull + acc[x & 3];
    acc[x & 3] = x;
  }
  return x;
}
