// The std::terminate hook, without linking libstdc++: a program that never
// loads the C++ runtime must not pay for loading it at start-up. Everything
// of libstdc++ used here is looked up with dlsym in the process's own copy
// (the one that throws, with its own terminate handler and exception
// state). Runs in normal context inside std::terminate, never in a signal
// handler.
#include "install/terminate.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <exception>
#include <typeinfo>

#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/terminate_record.h"

namespace faultline::core {

namespace {

using Handler = void (*)();
using SetTerminate = Handler (*)(Handler);
using CurrentType = std::type_info* (*)();
// std::current_exception() returns an exception_ptr (one pointer, to the
// thrown object) in memory whose address is its hidden first argument.
using CurrentException = void* (*)(void** out);

struct Cxx {
  SetTerminate set_terminate;
  CurrentType current_type;
  CurrentException current_exception;
  const std::type_info* std_exception;  // typeid(std::exception)
};

Cxx g_cxx = {};
Handler g_previous = nullptr;
bool g_installed = false;

void* g_libstdcxx = nullptr;  // never closed: our handler is installed in it

// The C++ runtime's path if the process has one loaded, in any scope:
// Python loads extensions (and the C++ runtime they need) with RTLD_LOCAL,
// out of dlsym(RTLD_DEFAULT)'s reach. A walk of the loaded modules, not a
// dlopen by soname, which would search the library path and the loader's
// cache for a library that is not there.
int find_libstdcxx(dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (!name || !strstr(name, "/libstdc++.so")) return 0;
  str_copy(static_cast<char*>(out), 4096, name);
  return 1;
}

template <typename T>
T find(const char* name) {
  return reinterpret_cast<T>(dlsym(g_libstdcxx, name));
}

// The object in flight as a std::exception, or null when it is not one
// (throw 42). The catch type's __do_catch is what a `catch (const
// std::exception&)` runs; it adjusts the pointer to the base.
const std::exception* as_std_exception(const std::type_info* thrown) {
  if (!g_cxx.current_exception || !g_cxx.std_exception) return nullptr;
  void* obj = nullptr;
  g_cxx.current_exception(&obj);  // one reference more: we abort anyway
  if (!obj || !g_cxx.std_exception->__do_catch(thrown, &obj, 1)) return nullptr;
  return static_cast<const std::exception*>(obj);
}

[[noreturn]] void on_terminate() {
  TerminateInfo& t = g_terminate;
  if (std::type_info* type = g_cxx.current_type ? g_cxx.current_type() : nullptr) {
    t.has_exception = 1;
    str_copy(t.type, sizeof t.type, type->name());
    if (const std::exception* e = as_std_exception(type)) {
      const char* what = e->what();
      size_t n = str_copy(t.message, sizeof t.message, what ? what : "");
      t.message_truncated = what && what[n] != '\0';
    }
  }
  t.tid = static_cast<int>(sys_gettid());
  __atomic_store_n(&t.set, 1, __ATOMIC_RELEASE);
  // The previous handler (libstdc++'s verbose one prints the familiar
  // "terminate called after throwing ...") ends with abort(), which our
  // SIGABRT handler turns into a "terminate" report.
  if (g_previous && g_previous != on_terminate) g_previous();
  __builtin_abort();
}

}  // namespace

void install_terminate_handler() {
  if (g_installed) return;
  if (!g_libstdcxx) {
    static char path[4096];
    path[0] = '\0';
    dl_iterate_phdr(find_libstdcxx, path);
    if (!path[0]) return;  // no C++ runtime (yet): nothing can call std::terminate
    g_libstdcxx = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!g_libstdcxx) return;
  }
  auto set = find<SetTerminate>("_ZSt13set_terminatePFvvE");
  if (!set) return;
  g_cxx.set_terminate = set;
  g_cxx.current_type = find<CurrentType>("__cxa_current_exception_type");
  g_cxx.current_exception = find<CurrentException>("_ZSt17current_exceptionv");
  g_cxx.std_exception = find<const std::type_info*>("_ZTISt9exception");
  g_previous = set(on_terminate);
  g_installed = true;
}

void uninstall_terminate_handler() {
  if (!g_installed) return;
  g_cxx.set_terminate(g_previous);
  g_installed = false;
}

}  // namespace faultline::core
