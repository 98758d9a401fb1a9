// Prints the walker's layout table for one minor version in the format of
// tools/python-layout-probe ("name value" lines), so test_layouts.py can
// compare the checked-in numbers with the interpreter's own headers.
#include <stdio.h>
#include <stdlib.h>

#include "core/python/layouts.h"

namespace {
void print_field(const char* name, long value, void*) {
  printf("%s %ld\n", name, value);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: python_layout_dump MINOR\n");
    return 2;
  }
  int minor = atoi(argv[1]);
  const faultline::core::python::PyLayout* l = faultline::core::python::layout_for_minor(minor);
  if (l) faultline::core::python::for_each_layout_field(*l, print_field, nullptr);
  faultline::core::python::for_each_debug_offset_position(minor, print_field, nullptr);
  return 0;
}
