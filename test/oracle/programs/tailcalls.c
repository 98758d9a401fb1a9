/* Tail-call scenarios for the symbolizer's tail-call frames: at -O2 each
 * `return f(x);` below is a jump, and the function that makes it leaves no
 * frame on the stack. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

volatile int sink;
int *volatile null_ptr;

/* dispatch: main calls through a function table; dispatch tail-calls apply.
 * The compiler sees through the constant table (a direct call, its target
 * recorded); through the volatile one it cannot (indirect: the call-site
 * record names no target, and gdb shows no tail-call frame). */
NOINLINE int apply(int v) { *null_ptr = v; return sink; }
NOINLINE int dispatch(int v) { sink = v; return apply(v + 1); }
NOINLINE int other(int v) { sink = v; return v; }
enum { OP_OTHER, OP_DISPATCH };
static int (*const ops[])(int) = {other, dispatch};
int (*volatile table[])(int) = {other, dispatch};

/* chain: a -> b -> c, each a tail call. */
NOINLINE int chain_c(int v) { *null_ptr = v; return sink; }
NOINLINE int chain_b(int v) { sink = v; return chain_c(v * 3); }
NOINLINE int chain_a(int v) { sink = v; return chain_b(v + 2); }

/* ambiguous: fork tail-calls left or right, both tail-call join. */
NOINLINE int join(int v) { *null_ptr = v; return sink; }
NOINLINE int left(int v) { sink = v; return join(v + 1); }
NOINLINE int right(int v) { sink = v + 7; return join(v - 1); }
NOINLINE int fork_(int v) {
  sink = v;
  if (v & 1) return left(v);
  return right(v);
}

static int cmp(const void *a, const void *b) {
  *null_ptr = *(const int *)a;
  return *(const int *)a - *(const int *)b;
}

int main(int argc, char **argv) {
  const char *s = argc > 1 ? argv[1] : "";
  int r = 0;
  if (!strcmp(s, "dispatch")) r = ops[OP_DISPATCH](argc);
  else if (!strcmp(s, "indirect")) r = table[argc - 1](argc);
  else if (!strcmp(s, "chain")) r = chain_a(argc);
  else if (!strcmp(s, "ambiguous")) r = fork_(argc);
  else if (!strcmp(s, "direct")) r = apply(argc);
  else if (!strcmp(s, "qsort")) {
    int v[4] = {3, 1, 2, argc};
    qsort(v, 4, sizeof v[0], cmp);
    r = v[0];
  } else if (!strcmp(s, "assert")) assert(argc == 0);
  return r + sink;
}
