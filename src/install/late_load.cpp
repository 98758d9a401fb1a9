#include "install/late_load.h"

#include <link.h>
#include <stdint.h>
#include <string.h>

#include "core/thread_state.h"

namespace faultline::install {
namespace {

struct Probe {
  bool found;
  bool is_static;
};

int visit(struct dl_phdr_info* info, size_t, void* arg) {
  auto* p = static_cast<Probe*>(arg);
  if (!info->dlpi_name || !strstr(info->dlpi_name, "libunwind")) return 0;
  p->found = true;
  if (info->dlpi_tls_modid == 0) {
    p->is_static = true;  // no TLS at all
    return 1;
  }
  // glibc gives the calling thread's block, or null while a dynamic block
  // was never allocated in this thread. Static blocks sit just below the
  // thread pointer (x86-64 TLS variant II); dynamic ones are malloc'ed.
  auto data = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
  uintptr_t tp = core::thread_pointer();
  p->is_static = data != 0 && data < tp && tp - data < (1u << 20);
  return 1;
}

}  // namespace

bool libunwind_tls_is_static() {
  Probe p = {false, false};
  dl_iterate_phdr(visit, &p);
  return p.found && p.is_static;
}

}  // namespace faultline::install
