#include "core/modules.h"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "core/module_snapshot.h"
#include "core/safe_read.h"
#include "core/str.h"

namespace faultline::core {
namespace {

char g_exe_path[4096];
uintptr_t g_exe_phdr = 0;
size_t g_exe_phnum = 0;
uintptr_t g_vdso = 0;

// The build-id note among the notes at [p, p + size), read in one go.
void read_build_id(Module* m, uintptr_t p, size_t size) {
  uint8_t notes[512];
  if (size > sizeof notes) size = sizeof notes;  // the build-id note comes first in practice
  if (!safe_read(notes, p, size)) return;
  // Notes: {namesz, descsz, type} name (4-aligned) desc (4-aligned).
  for (size_t off = 0; off + sizeof(ElfW(Nhdr)) <= size;) {
    ElfW(Nhdr) nh;
    __builtin_memcpy(&nh, notes + off, sizeof nh);
    size_t name = off + sizeof nh;
    size_t desc = name + ((nh.n_namesz + 3) & ~3u);
    if (desc < name || desc > size) return;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz > 0 &&
        nh.n_descsz <= sizeof m->build_id && desc + nh.n_descsz <= size) {
      if (__builtin_memcmp(notes + name, "GNU", 4) == 0) {
        __builtin_memcpy(m->build_id, notes + desc, nh.n_descsz);
        m->build_id_len = static_cast<uint8_t>(nh.n_descsz);
      }
      return;
    }
    off = desc + ((nh.n_descsz + 3) & ~3u);
  }
}

// A module's image: its program headers are at phdr (runtime address),
// read in one go.
void read_image(Module* m, uintptr_t phdr, size_t phnum) {
  ElfW(Phdr) ph[64];
  if (phnum > 64) phnum = 64;
  if (!safe_read(ph, phdr, phnum * sizeof ph[0])) return;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (size_t i = 0; i < phnum; ++i) {
    if (ph[i].p_type == PT_LOAD) {
      if (ph[i].p_vaddr < lo) lo = ph[i].p_vaddr;
      if (ph[i].p_vaddr + ph[i].p_memsz > hi) hi = ph[i].p_vaddr + ph[i].p_memsz;
    } else if (ph[i].p_type == PT_GNU_EH_FRAME) {
      m->eh_frame_hdr = m->bias + ph[i].p_vaddr;
    } else if (ph[i].p_type == PT_NOTE && m->build_id_len == 0) {
      read_build_id(m, m->bias + ph[i].p_vaddr, ph[i].p_memsz);
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

bool collect_modules(ModuleTable* table, Arena* arena, CaptureErrors* errors, bool reuse_snapshot) {
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
    // A module the snapshot already knows: no reads of its headers.
    if (reuse_snapshot &&
        module_snapshot_known(lm_addr, lm.l_addr, reinterpret_cast<uintptr_t>(lm.l_name), m)) {
      m->path = arena->dup(m->path, 4096);
      ++table->count;
      lm_addr = reinterpret_cast<uintptr_t>(lm.l_next);
      continue;
    }
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
