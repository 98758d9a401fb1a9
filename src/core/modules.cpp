#include "core/modules.h"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "core/safe_read.h"
#include "core/str.h"

namespace faultline::core {
namespace {

char g_exe_path[4096];
uintptr_t g_exe_phdr = 0;
size_t g_exe_phnum = 0;
uintptr_t g_vdso = 0;

// A module's image: its program headers are at phdr (runtime address).
void read_image(Module* m, uintptr_t phdr, size_t phnum) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  if (phnum > 256) phnum = 256;
  for (size_t i = 0; i < phnum; ++i) {
    ElfW(Phdr) ph;
    if (!safe_read_obj(&ph, phdr + i * sizeof ph)) return;
    if (ph.p_type == PT_LOAD) {
      if (ph.p_vaddr < lo) lo = ph.p_vaddr;
      if (ph.p_vaddr + ph.p_memsz > hi) hi = ph.p_vaddr + ph.p_memsz;
    } else if (ph.p_type == PT_NOTE && m->build_id_len == 0) {
      // Notes: {namesz, descsz, type} name (4-aligned) desc (4-aligned).
      uintptr_t p = m->bias + ph.p_vaddr;
      uintptr_t end = p + ph.p_memsz;
      while (p + sizeof(ElfW(Nhdr)) <= end) {
        ElfW(Nhdr) nh;
        if (!safe_read_obj(&nh, p)) break;
        uintptr_t name = p + sizeof nh;
        uintptr_t desc = name + ((nh.n_namesz + 3) & ~3u);
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz > 0 &&
            nh.n_descsz <= sizeof m->build_id) {
          char gnu[4];
          if (safe_read(gnu, name, 4) && str_eq(gnu, "GNU") &&
              safe_read(m->build_id, desc, nh.n_descsz)) {
            m->build_id_len = static_cast<uint8_t>(nh.n_descsz);
          }
          break;
        }
        p = desc + ((nh.n_descsz + 3) & ~3u);
      }
    }
  }
  if (lo < hi) {
    m->base = m->bias + (lo & ~static_cast<uintptr_t>(4095));
    m->end = m->bias + hi;
  }
}

}  // namespace

const char* modules_exe_path() {
  return g_exe_path;
}

void modules_init() {
  long n = readlink("/proc/self/exe", g_exe_path, sizeof g_exe_path - 1);
  g_exe_path[n > 0 ? n : 0] = '\0';
  if (n <= 0) {
    // No /proc: the path the kernel was asked to execute will do.
    const char* execfn = reinterpret_cast<const char*>(getauxval(AT_EXECFN));
    if (execfn) str_copy(g_exe_path, sizeof g_exe_path, execfn);
  }
  g_exe_phdr = getauxval(AT_PHDR);
  g_exe_phnum = getauxval(AT_PHNUM);
  g_vdso = getauxval(AT_SYSINFO_EHDR);
}

bool collect_modules(ModuleTable* table, Arena* arena, CaptureErrors* errors) {
  table->count = 0;
  table->truncated = false;
  struct r_debug dbg;
  if (!safe_read_obj(&dbg, reinterpret_cast<uintptr_t>(&_r_debug))) {
    errors->add("modules: _r_debug is not readable");
    return false;
  }
  uintptr_t lm_addr = reinterpret_cast<uintptr_t>(dbg.r_map);
  // The link map is a list the loader may be editing (dlopen on another
  // thread): bound the walk and stop at a cycle-length guard.
  for (int guard = 0; lm_addr && guard < 4096; ++guard) {
    struct link_map lm;
    if (!safe_read_obj(&lm, lm_addr)) {
      errors->add("modules: link map entry not readable");
      break;
    }
    if (table->count >= table->capacity) {
      table->truncated = true;
      break;
    }
    Module* m = &table->items[table->count];
    *m = Module{};
    m->bias = lm.l_addr;
    static char name[4096];  // static: the signal stack may be small
    long len = safe_read_cstr(name, sizeof name, reinterpret_cast<uintptr_t>(lm.l_name));
    bool first = table->count == 0;
    if (first && len <= 0) {
      m->is_main = true;
      m->path = arena->dup(g_exe_path, sizeof g_exe_path);
      // The executable's headers are in auxv (its l_addr is the PIE bias).
      read_image(m, g_exe_phdr, g_exe_phnum);
    } else {
      m->path = len > 0 ? arena->dup(name, sizeof name) : "";
      ElfW(Ehdr) eh;
      uintptr_t ehdr = lm.l_addr;
      if (g_vdso && lm.l_addr == g_vdso) m->is_vdso = true;
      if (safe_read_obj(&eh, ehdr) && eh.e_ident[0] == ELFMAG0 && eh.e_ident[1] == ELFMAG1 &&
          eh.e_phentsize == sizeof(ElfW(Phdr))) {
        read_image(m, ehdr + eh.e_phoff, eh.e_phnum);
      }
    }
    if (m->end > m->base) ++table->count;
    lm_addr = reinterpret_cast<uintptr_t>(lm.l_next);
  }
  return table->count > 0;
}

int find_module(const ModuleTable& table, uintptr_t pc) {
  for (int i = 0; i < table.count; ++i) {
    if (pc >= table.items[i].base && pc < table.items[i].end) return i;
  }
  return -1;
}

}  // namespace faultline::core
