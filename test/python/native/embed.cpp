// An embedding program: installs faultline first, then dlopens a libpython
// (the path is argv[1]) and runs Python code that crashes (argv[2]). At
// install there is no Python in the process, so the walker must find the
// runtime at crash time.
#include <dlfcn.h>
#include <stdio.h>

#include "faultline/faultline.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: embed LIBPYTHON CODE\n");
    return 2;
  }
  if (faultline_install(nullptr) != 0) return 3;
  void* py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!py) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 4;
  }
  auto initialize = reinterpret_cast<void (*)(int)>(dlsym(py, "Py_InitializeEx"));
  auto run = reinterpret_cast<int (*)(const char*)>(dlsym(py, "PyRun_SimpleString"));
  if (!initialize || !run) return 5;
  initialize(0);
  return run(argv[2]);
}
