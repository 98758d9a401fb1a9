// Placeholder rules until the PyTorch-aware table lands.
#include "core/classify.h"

#include "core/str.h"

namespace faultline::core {
namespace {
const Origin kNative = {"native", "native code", false};
const Origin kCpython = {"cpython", "the CPython interpreter", false};
const Origin kPython = {"python", "Python code", true};
}  // namespace

const Origin& classify_native(const char* module, const char* symbol) {
  (void)symbol;
  const char* base = path_basename(module ? module : "");
  if (str_starts_with(base, "libpython") || str_starts_with(base, "python")) return kCpython;
  return kNative;
}

const Origin& classify_python(const char*, const char*) {
  return kPython;
}

}  // namespace faultline::core
