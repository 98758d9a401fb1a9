// Install-time half of the sigaction() interposer (sigaction_hook.cpp): what
// needs the loader (dlsym, dladdr, dl_iterate_phdr), which the interposer
// itself must not call (a program's signal handler may call sigaction()).
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>

#include "core/crash_state.h"
#include "core/signal/chain_call.h"
#include "install/sigaction_hook.h"

// CPython's, where the program or a library it links exports it.
extern "C" void Py_FatalError(const char*) __attribute__((weak));

namespace faultline::core {

namespace {

struct Extent {
  uintptr_t address;  // a function of the module looked for
  uintptr_t start = 0;
  uintptr_t end = 0;
};

// Stops at the module whose loaded segments span `address`: its extent.
int extent_of(struct dl_phdr_info* info, size_t, void* data) {
  auto* e = static_cast<Extent*>(data);
  uintptr_t start = 0, end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t lo = static_cast<uintptr_t>(info->dlpi_addr) + ph.p_vaddr;
    uintptr_t hi = lo + ph.p_memsz;
    if (end == 0 || lo < start) start = lo;
    if (hi > end) end = hi;
  }
  if (end == 0 || e->address < start || e->address >= end) return 0;
  e->start = start;
  e->end = end;
  return 1;
}

}  // namespace

SigactionFn sigaction_before_install() {
  if (!g_real_sigaction) {
    g_real_sigaction = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
  }
  return g_real_sigaction;
}

void find_python_module() {
  if (g_python_module_end != 0) return;
  // A weak reference first: no failed dlsym (an error text formatted with
  // malloc) at the start of every program without Python. dlsym for a
  // CPython loaded later (before each dlopen, until found).
  void* fatal = reinterpret_cast<void*>(&Py_FatalError);
  if (!fatal && g_crash.installed) fatal = dlsym(RTLD_DEFAULT, "Py_FatalError");
  if (!fatal) return;
  Extent e{reinterpret_cast<uintptr_t>(fatal)};
  if (dl_iterate_phdr(extent_of, &e) == 0) return;
  g_python_module_start = e.start;
  g_python_module_end = e.end;
}

void resolve_real_sigaction() {
  sigaction_before_install();
  find_python_module();
  // Preloaded or linked, the program's sigaction() is this library's; loaded
  // late (dlopen, RTLD_LOCAL), libc's.
  Dl_info mine = {}, program = {};
  void* used = dlsym(RTLD_DEFAULT, "sigaction");
  g_sigaction_interposed =
      used && dladdr(used, &program) &&
              dladdr(reinterpret_cast<void*>(&resolve_real_sigaction), &mine) &&
              program.dli_fbase == mine.dli_fbase
          ? 1
          : 0;
}

}  // namespace faultline::core
