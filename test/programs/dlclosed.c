/* Loads libfaultline.so (argv[1]) with dlopen, installs it, arms a timed
 * dump far ahead (its watchdog thread waits in the library's code), closes
 * the library with dlclose, then dereferences NULL. faultline's signal
 * handlers and its thread point into the library: it must stay mapped
 * (linked -z nodelete), so the crash is reported and the process dies of
 * SIGSEGV as without faultline. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <faultline/faultline.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 3;
  void (*init)(faultline_options*) = (void (*)(faultline_options*))dlsym(lib, "faultline_options_init");
  int (*install)(const faultline_options*) = (int (*)(const faultline_options*))dlsym(lib, "faultline_install");
  int (*after)(unsigned, int) = (int (*)(unsigned, int))dlsym(lib, "faultline_dump_after");
  if (!init || !install || !after) return 4;
  faultline_options o;
  init(&o);
  if (install(&o) != 0) return 5;
  if (after(600000, 0) != 0) return 6;
  if (dlclose(lib) != 0) return 7;
  printf("closed\n");
  fflush(stdout);
  volatile int* p = NULL;
  return *p;
}
