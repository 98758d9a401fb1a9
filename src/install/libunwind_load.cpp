#include "install/libunwind_load.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>

#include "core/base/thread_state.h"
#include "core/unwind/unwind.h"
#include "core/unwind/unwind_with_libunwind.h"
#include "install/dlopen_hook.h"

// libunwind.h names its functions through macros (unw_step is
// _ULx86_64_step with UNW_LOCAL_ONLY): the symbol is the macro's expansion.
#define FAULTLINE_SYMBOL_NAME(x) FAULTLINE_SYMBOL_NAME2(x)
#define FAULTLINE_SYMBOL_NAME2(x) #x

namespace faultline::install {
#if FAULTLINE_LIBUNWIND
namespace {

template <typename T>
bool resolve(void* handle, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(handle, name));
  return *out != nullptr;
}

// True when the loaded libunwind's thread-local storage sits in the static
// TLS block (the program linked libunwind itself, so it was there at
// start), so touching it in a signal handler allocates nothing; false when
// it is dynamic (loaded here, after start) or cannot be told.
bool tls_is_static(void* handle) {
  size_t modid = 0;
  if (dlinfo(handle, RTLD_DI_TLS_MODID, &modid) != 0) return false;
  if (modid == 0) return true;  // no TLS at all
  void* data = nullptr;
  // The calling thread's block, or null while a dynamic block was never
  // allocated in this thread. Static blocks sit just below the thread
  // pointer (x86-64 TLS variant II); dynamic ones are malloc'ed.
  if (dlinfo(handle, RTLD_DI_TLS_DATA, &data) != 0 || !data) return false;
  auto at = reinterpret_cast<uintptr_t>(data);
  uintptr_t tp = core::thread_pointer();
  return at < tp && tp - at < (uintptr_t{1} << 20);
}

}  // namespace
#endif

bool libunwind_load(const char** why) {
#if !FAULTLINE_LIBUNWIND
  *why = "the libunwind backend is not built for this architecture";
  return false;
#else
  *why = "";
  if (core::libunwind_available()) return true;
  void* h = dlopen_unhooked("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *why = e ? e : "libunwind.so.8 could not be loaded";
    return false;
  }
  core::LibunwindApi api = {};
  bool ok = resolve(h, FAULTLINE_SYMBOL_NAME(unw_init_local), &api.init_local) &&
            resolve(h, FAULTLINE_SYMBOL_NAME(unw_init_local2), &api.init_local2) &&
            resolve(h, FAULTLINE_SYMBOL_NAME(unw_get_reg), &api.get_reg) &&
            resolve(h, FAULTLINE_SYMBOL_NAME(unw_is_signal_frame), &api.is_signal_frame) &&
            resolve(h, FAULTLINE_SYMBOL_NAME(unw_step), &api.step) &&
            resolve(h, FAULTLINE_SYMBOL_NAME(unw_set_caching_policy), &api.set_caching_policy) &&
            resolve(h, FAULTLINE_SYMBOL_NAME(unw_tdep_getcontext), &api.getcontext) &&
            resolve(h, FAULTLINE_SYMBOL_NAME(unw_local_addr_space), &api.local_addr_space);
  if (!ok) {
    *why = "libunwind.so.8 lacks the local-unwinding functions";
    dlclose(h);
    return false;
  }
  // Kept loaded for good: the crash path holds its functions.
  core::unwind_use_libunwind(api, tls_is_static(h));
  return true;
#endif
}

}  // namespace faultline::install
