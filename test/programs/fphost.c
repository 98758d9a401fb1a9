/* main -> outer_call -> fp_only_read (libfpnotab.so, no unwind tables),
 * which reads address 0 past its prologue. Usage: fphost */
int fp_only_read(int* p, int n);
volatile int g_fphost_sink;

__attribute__((noinline)) int outer_call(int* p) {
  int r = fp_only_read(p, 3);
  g_fphost_sink = r; /* not a tail call */
  return r + 1;
}

int main(void) {
  g_fphost_sink = outer_call(0);
  return 0;
}
