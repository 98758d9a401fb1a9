/* Calls into the C++ library dlctor's constructor loaded, which throws an
 * exception nobody catches. No thread is started. */
#include <dlfcn.h>

extern void* g_dlctor_handle;

int main(void) {
  if (!g_dlctor_handle) return 2;
  void (*throw_late)(void) = (void (*)(void))dlsym(g_dlctor_handle, "throw_late");
  if (!throw_late) return 2;
  throw_late();
  return 0;
}
