/* A library without unwind tables but with frame pointers: fp_only_read
 * has pushed %rbp and two callee-saved registers when it faults, so the top
 * of the stack is a saved register, not a return address. */
volatile int g_fpnotab_sink;

__attribute__((noinline)) int fpnotab_helper(int x) {
  g_fpnotab_sink = x;
  return x + 1;
}

__attribute__((noinline)) int fp_only_read(int* p, int n) {
  int a = fpnotab_helper(n);
  int b = fpnotab_helper(a);
  return *p + a + b;
}
