#include "install/libunwind_load.h"

#include <dlfcn.h>

#include "core/unwind.h"
#include "install/late_load.h"

// libunwind.h names its functions through macros (unw_step is
// _ULx86_64_step with UNW_LOCAL_ONLY): the symbol is the macro's expansion.
#define FAULTLINE_SYMBOL_NAME(x) FAULTLINE_SYMBOL_NAME2(x)
#define FAULTLINE_SYMBOL_NAME2(x) #x

namespace faultline::install {
namespace {

template <typename T>
bool resolve(void* handle, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

bool libunwind_load(const char** why) {
  *why = "";
  if (core::libunwind_available()) return true;
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
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
  core::unwind_use_libunwind(api, libunwind_tls_is_static());
  return true;
}

}  // namespace faultline::install
