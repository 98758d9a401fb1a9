/* A library without unwind tables (-fno-asynchronous-unwind-tables): its
 * leaf faults on its first instruction, the return address on top of the
 * stack. */
int nounwind_read(int* p) { return *p; }
