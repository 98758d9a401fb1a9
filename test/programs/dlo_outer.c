/* Opens a library by bare name, found only through this library's own
 * RUNPATH ($ORIGIN/dlo): dlopen must see this library as its caller. */
#include <dlfcn.h>

int dlopen_inner(void) {
  void* h = dlopen("libdlo_inner.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  int (*value)(void) = (int (*)(void))dlsym(h, "dlo_inner_value");
  return value ? value() : -1;
}
