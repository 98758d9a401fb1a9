/* Found by dlo_outer through its RUNPATH only. */
int dlo_inner_value(void) {
  return 42;
}
