// Locating _PyRuntime and choosing its layout. See runtime.h.
#include "core/python/runtime.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/arch.h"
#include "core/base/safe_read.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/modules/elf_lookup.h"

namespace faultline::core::python {

const char kNoRuntime[] = "no CPython runtime in the process";

namespace {

// Modules that may define _PyRuntime: the executable (static builds,
// embedders linking libpython.a) and libpython3.X.so. Other modules are not
// searched: a torch job maps hundreds of large libraries.
bool may_define_runtime(const Module& m) {
  if (m.is_vdso || !m.path) return false;
  return m.is_main || str_starts_with(path_basename(m.path), "libpython3");
}

// The minor version from a module name: ".../libpython3.11.so.1.0" or
// ".../python3.11" give 11; -1 if the name does not say.
int minor_from_name(const char* path) {
  const char* base = path_basename(path);
  const char* p = str_find(base, str_len(base), "python3.");
  if (!p) return -1;
  p += 8;
  int minor = 0, digits = 0;
  while (*p >= '0' && *p <= '9' && digits < 3) {
    minor = minor * 10 + (*p++ - '0');
    ++digits;
  }
  return digits ? minor : -1;
}

void format_version(Runtime* rt, int minor) {
  StrBuf b(rt->version, sizeof rt->version);
  if (rt->hexversion == 0) {
    b.add("3.").add_dec(minor);
    return;
  }
  uint32_t v = rt->hexversion;
  b.add_dec(v >> 24).add(".").add_dec((v >> 16) & 0xff).add(".").add_dec((v >> 8) & 0xff);
  uint32_t level = (v >> 4) & 0xf;
  if (level == 0xa) b.add("a").add_dec(v & 0xf);
  if (level == 0xb) b.add("b").add_dec(v & 0xf);
  if (level == 0xc) b.add("rc").add_dec(v & 0xf);
}

// The layout of the runtime at `runtime`, defined by the module at `path`;
// py_version: the address of Py_Version, or 0.
const char* layout_for(const char* path, uintptr_t py_version, uintptr_t runtime, Runtime* rt) {
  // 3.13+: the runtime describes itself.
  uint8_t image[kDebugOffsetsMaxBytes];
  bool have_image = safe_read(image, runtime, sizeof image);
  if (have_image && image[0] == 'x' && image[1] == 'd' && image[2] == 'e') {
    uint64_t hex = 0;
    const char* why = layout_from_debug_offsets(image, sizeof image, &rt->layout, &hex);
    if (why) return why;
    rt->hexversion = static_cast<uint32_t>(hex);
    format_version(rt, rt->layout.minor);
    return nullptr;
  }
  // 3.11+ export Py_Version (PY_VERSION_HEX); older ones say it in the name.
  int minor = -1;
  uint64_t hex = 0;
  if (py_version && safe_read_obj(&hex, py_version) && (hex >> 24) == 3) {
    rt->hexversion = static_cast<uint32_t>(hex);
    minor = static_cast<int>((hex >> 16) & 0xff);
  } else {
    rt->hexversion = 0;
    minor = minor_from_name(path);
  }
  if (minor >= 13) return "python: 3.13+ runtime without _Py_DebugOffsets";
  const PyLayout* l = layout_for_minor(minor);
  if (!l) return "python: unsupported CPython version (3.9 to 3.14 are known)";
  rt->layout = *l;
  format_version(rt, minor);
  return nullptr;
}

}  // namespace

const char* locate_runtime(const ModuleTable& modules, Runtime* rt) {
  rt->found = false;
  for (int i = 0; i < modules.count; ++i) {
    const Module& m = modules.items[i];
    if (!may_define_runtime(m)) continue;
    SymbolLookup syms;
    if (!syms.open(m)) continue;
    PythonExports e = {};
    e.runtime = syms.find("_PyRuntime");
    if (!e.runtime) {
      syms.close();
      continue;
    }
    e.path = m.path;
    e.module_base = m.base;
    e.py_version = syms.find("Py_Version");
    e.code_type = syms.find("PyCode_Type");
    e.bytes_type = syms.find("PyBytes_Type");
    e.unicode_type = syms.find("PyUnicode_Type");
    syms.close();
    return runtime_from_exports(e, rt);
  }
  return kNoRuntime;
}

const char* runtime_from_exports(const PythonExports& e, Runtime* rt) {
  rt->found = false;
  if (!e.runtime || !e.path) return kNoRuntime;
  const char* why = layout_for(e.path, e.py_version, e.runtime, rt);
  if (why) return why;
  rt->address = e.runtime;
  rt->module_base = e.module_base;
  rt->code_type = e.code_type;
  rt->bytes_type = e.bytes_type;
  rt->unicode_type = e.unicode_type;
  rt->found = true;
  return nullptr;
}

long find_pthread_tid_offset() {
  // The thread's own struct pthread (pthread_self()) holds the kernel tid.
  // Scanning for our tid finds the field's offset without depending on a
  // glibc version.
  uintptr_t self = pthread_self_address();
  int32_t tid = static_cast<int32_t>(sys_gettid());
  int32_t words[512];  // 2 KiB: struct pthread's tid sits at 0x2d0 in glibc 2.3x
  if (!self || !safe_read(words, self, sizeof words)) return -1;
  for (int i = 0; i < 512; ++i) {
    if (words[i] == tid) return i * 4;
  }
  return -1;
}

}  // namespace faultline::core::python
