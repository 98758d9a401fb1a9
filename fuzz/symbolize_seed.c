/* Seed for symbolize_elf_fuzzer: a small program with DWARF, inlining and
   two compile-unit-worthy functions; built with -O2 -g by symbolize_fuzz.cmake. */
#include <stdio.h>
#include <stdlib.h>

static inline int twice(int x) { return 2 * x + rand(); }

__attribute__((noinline)) int sum(int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += twice(i);
  return s;
}

int main(int argc, char** argv) {
  (void)argv;
  printf("%d\n", sum(argc * 10));
  return 0;
}
