// The preload entry point: the constructor that installs faultline when the
// library was preloaded (LD_PRELOAD, /etc/ld.so.preload, ld.so --preload),
// and does nothing when a program linked or dlopened it (that program calls
// faultline_install itself). Runs in every preloaded process before main:
// what only it calls stays in this file, where the compiler places it with
// the constructor in .text.startup (core/base/start_text.h).
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/str.h"
#include "core/crash_state.h"
#include "faultline/faultline.h"
#include "install/cmdline.h"
#include "install/options.h"

using namespace faultline::core;

namespace {

// The file name part of a path.
const char* base_name(const char* path, size_t len, size_t* base_len) {
  size_t start = len;
  while (start > 0 && path[start - 1] != '/') --start;
  *base_len = len - start;
  return path + start;
}

// True when an LD_PRELOAD entry names this library: its file name, or the
// same file by device and inode (a copy or link under another name).
bool named_in(const char* p, const Dl_info& info) {
  size_t self_len = 0;
  const char* self = base_name(info.dli_fname, strlen(info.dli_fname), &self_len);
  struct stat self_st;
  bool have_st = stat(info.dli_fname, &self_st) == 0;
  // Entries are separated by spaces or colons (ld.so(8)); in
  // /etc/ld.so.preload by any white space.
  for (const char* e = p; *e;) {
    size_t len = strcspn(e, " :\t\n");
    size_t entry_base_len = 0;
    const char* entry_base = base_name(e, len, &entry_base_len);
    if (len > 0 && entry_base_len == self_len && memcmp(entry_base, self, self_len) == 0) {
      return true;
    }
    char path[PATH_MAX];
    struct stat st;
    if (have_st && len > 0 && len < sizeof path && memchr(e, '/', len)) {
      memcpy(path, e, len);
      path[len] = '\0';
      if (stat(path, &st) == 0 && st.st_dev == self_st.st_dev && st.st_ino == self_st.st_ino) {
        return true;
      }
    }
    e += len;
    while (*e == ' ' || *e == ':' || *e == '\t' || *e == '\n') ++e;
  }
  return false;
}

// Where the loader placed this library: the objects it preloads
// (LD_PRELOAD, /etc/ld.so.preload, ld.so --preload) come right after the
// executable and the vDSO, before the executable's own DT_NEEDED libraries;
// a linked library comes among or after those, a dlopened one at the end.
enum class Placed { kUndecided, kPreloaded, kAfterNeeded, kLinked };
struct LinkOrder {
  uintptr_t self;          // an address in this library's code
  const char* needed[64];  // the executable's DT_NEEDED names
  int nneeded;
  bool needed_seen;  // one of them is before us
  Placed verdict;
};

int link_order_step(struct dl_phdr_info* info, size_t, void* data) {
  LinkOrder* o = static_cast<LinkOrder*>(data);
  uintptr_t lo = UINTPTR_MAX, hi = 0, dyn = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      lo = ph.p_vaddr < lo ? ph.p_vaddr : lo;
      hi = ph.p_vaddr + ph.p_memsz > hi ? ph.p_vaddr + ph.p_memsz : hi;
    } else if (ph.p_type == PT_DYNAMIC) {
      dyn = info->dlpi_addr + ph.p_vaddr;
    }
  }
  if (lo >= hi) return 0;
  uintptr_t start = info->dlpi_addr + lo, end = info->dlpi_addr + hi;
  if (o->nneeded < 0) {  // the first object: the executable
    o->nneeded = 0;
    if (!dyn) return 1;
    uintptr_t strtab = 0;
    uint64_t needed[64];
    int n = 0;
    for (const ElfW(Dyn)* d = reinterpret_cast<const ElfW(Dyn)*>(dyn); d->d_tag != DT_NULL; ++d) {
      if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
      if (d->d_tag == DT_NEEDED && n < 64) needed[n++] = d->d_un.d_val;
    }
    // The loader may have rewritten the pointer to a runtime address.
    if (strtab && (strtab < start || strtab >= end)) strtab += info->dlpi_addr;
    if (!strtab || strtab < start || strtab >= end) return 1;
    for (int k = 0; k < n; ++k)
      o->needed[o->nneeded++] = reinterpret_cast<const char*>(strtab + needed[k]);
    return 0;
  }
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  size_t base_len = 0;
  const char* base = base_name(name, strlen(name), &base_len);
  bool needed = false;
  for (int k = 0; k < o->nneeded && !needed; ++k) {
    size_t need_len = 0;
    const char* need = base_name(o->needed[k], strlen(o->needed[k]), &need_len);
    needed = need_len == base_len && memcmp(need, base, base_len) == 0;
  }
  if (start <= o->self && o->self < end) {
    // Linked (the executable needs it, maybe first), or after what it
    // needs (dlopened, linked through another library, or preloaded after
    // another preload that the executable also needs).
    o->verdict = needed           ? Placed::kLinked
                 : o->needed_seen ? Placed::kAfterNeeded
                                  : Placed::kPreloaded;
    return 1;
  }
  o->needed_seen = o->needed_seen || needed;
  return 0;
}

Placed placed() {
  LinkOrder o = {};
  o.self = reinterpret_cast<uintptr_t>(&base_name);
  o.nneeded = -1;
  dl_iterate_phdr(link_order_step, &o);
  return o.nneeded > 0 ? o.verdict : Placed::kUndecided;
}

// /etc/ld.so.preload names this library (under any file name).
bool named_in_preload_file(const Dl_info& info) {
  int fd = open("/etc/ld.so.preload", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return strstr(buf, "libfaultline") || named_in(buf, info);
}

// True when this library was preloaded (as opposed to linked or dlopened):
// "libfaultline" in LD_PRELOAD (the quick check, every preloaded start),
// else an LD_PRELOAD entry naming it under another name, else its place in
// the loader's list (/etc/ld.so.preload, ld.so --preload).
bool preloaded() {
  const char* p = getenv("LD_PRELOAD");
  if (p && strstr(p, "libfaultline")) return true;
  // A setuid or file-capability program: the loader ignored LD_PRELOAD,
  // and a system-wide preload must not give its caller a report of a
  // privileged process (its registers, its address layout).
  if (getauxval(AT_SECURE)) return false;
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&base_name), &info) || !info.dli_fname) return false;
  size_t self_len = 0;
  const char* self = base_name(info.dli_fname, strlen(info.dli_fname), &self_len);
  // Under its own name an entry naming it would have said so above.
  if (p && *p && !strstr(self, "libfaultline") && named_in(p, info)) return true;
  switch (placed()) {
    case Placed::kPreloaded:
      return true;
    case Placed::kAfterNeeded:
      // An earlier preload the executable also needs (libstdc++ preloaded
      // by LD_PRELOAD) puts a system-wide preload after it.
      return named_in_preload_file(info);
    default:
      return false;
  }
}

// The preload entry point. glibc passes (argc, argv, envp) to constructors.
__attribute__((constructor)) void faultline_preload_init(int argc, char** argv, char**) {
  if (!preloaded()) return;
  int off = 0;
  faultline::install::env_bool("FAULTLINE_DISABLE", &off);
  if (off) return;
  Config* cfg = &g_crash.config;
  int len = 0;
  for (int i = 0; argv && i < argc; ++i) {
    size_t n = str_len(argv[i]);
    if (len + static_cast<int>(n) + 1 > static_cast<int>(sizeof cfg->argv)) {
      cfg->argv_truncated = true;  // the arguments that fit, whole; the report says the rest
      break;
    }
    memcpy(cfg->argv + len, argv[i], n + 1);
    len += static_cast<int>(n) + 1;
  }
  if (argv) {
    cfg->argv_len = len;
    faultline::core::g_argv_from_constructor = true;
  }
  faultline_install(nullptr);
}

}  // namespace
