/* The dlopened library of the frame oracle corpus. Its constructor faults
 * when CORPUS_CTOR_CRASH=1 (a crash while dlopen runs constructors). */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

volatile int corpus_lib_sink;
volatile int *volatile corpus_lib_null = 0;

NOINLINE static void lib_inner(int v) { *corpus_lib_null = v; }
NOINLINE void corpus_lib_middle(int v) { lib_inner(v + 1); corpus_lib_sink++; }
void corpus_lib_entry(int v) { corpus_lib_middle(v); corpus_lib_sink++; }

NOINLINE static void ctor_body(void) { corpus_lib_sink = *corpus_lib_null; }
__attribute__((constructor)) static void corpus_lib_init(void) {
  const char *e = getenv("CORPUS_CTOR_CRASH");
  if (e && e[0] == '1') ctor_body();
  corpus_lib_sink++;
}
