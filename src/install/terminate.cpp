// Compiled with exceptions (see CMakeLists.txt): it has to look at the
// exception in flight. Runs in normal context inside std::terminate, never in
// a signal handler.
#include "install/terminate.h"

#include <cxxabi.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <exception>
#include <typeinfo>

#include "core/str.h"
#include "core/sys.h"
#include "core/terminate.h"

namespace faultline::core {

namespace {

std::terminate_handler g_previous = nullptr;
bool g_installed = false;

[[noreturn]] void on_terminate() {
  TerminateInfo& t = g_terminate;
  if (std::type_info* type = abi::__cxa_current_exception_type()) {
    t.has_exception = 1;
    str_copy(t.type, sizeof t.type, type->name());
    try {
      throw;  // rethrow the active exception to look at it
    } catch (const std::exception& e) {
      const char* what = e.what();
      size_t n = str_copy(t.message, sizeof t.message, what ? what : "");
      t.message_truncated = what && what[n] != '\0';
    } catch (...) {
      // Not a std::exception (throw 42): the type is all there is.
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
  g_previous = std::set_terminate(on_terminate);
  g_installed = true;
}

void uninstall_terminate_handler() {
  if (!g_installed) return;
  std::set_terminate(g_previous);
  g_installed = false;
}

}  // namespace faultline::core
