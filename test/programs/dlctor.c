/* A C library whose constructor loads a C++ library (RTLD_LOCAL) named by
 * $LATECXX_CTOR_LIB: a program linking it has the C++ runtime loaded, out
 * of the global scope, before a preloaded library's constructor runs. */
#include <dlfcn.h>
#include <stdlib.h>

void* g_dlctor_handle;

__attribute__((constructor)) static void load(void) {
  const char* path = getenv("LATECXX_CTOR_LIB");
  if (path) g_dlctor_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
}
