/* The busy thread of `dumpwait busy`, compiled at -O2 without frame pointers
 * (test/programs/CMakeLists.txt): a thread stopped here is in the middle of
 * user code whose caller only the unwind tables find (%rbp is still the
 * caller's caller's frame pointer). */
#include <stdint.h>

__attribute__((noinline)) uint64_t spin_without_frame_pointer(volatile int* stop) {
  volatile uint64_t acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = (uint64_t)i;
  uint64_t x = 1;
  while (!*stop) {
    for (int i = 0; i < 16; ++i) {
      x = x * 6364136223846793005ull + acc[i];
      acc[i] = x;
    }
  }
  return x;
}
