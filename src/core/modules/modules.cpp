#include "core/modules/modules.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "core/base/safe_read.h"
#include "core/base/start_text.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/modules/elf_source.h"
#include "core/modules/module_snapshot.h"

namespace faultline::core {
namespace {

char g_exe_path[4096];
const char* g_execfn = nullptr;  // AT_EXECFN: the path as the kernel was given it
const char* execfn() {
  return g_execfn ? g_execfn : "";
}
// modules_exe_path(): 0 not read, 1 being read, 2 ready.
volatile int g_exe_path_state = 0;
uintptr_t g_exe_phdr = 0;
size_t g_exe_phnum = 0;
uintptr_t g_vdso = 0;
// Started through its loader (`ld.so prog`, as portable bundles and some
// sandboxes start programs): the kernel ran ld.so, so /proc/self/exe is the
// loader, not the program. glibc's loader then points AT_PHDR at the
// program it mapped, whose first mapping starts at g_exe_start, and AT_BASE
// (where the kernel put the program's interpreter) is 0.
bool g_exe_via_loader = false;
uintptr_t g_exe_start = 0;

long mapped_file_path(uintptr_t start, char* out, size_t cap);

// The build-id note among the notes in notes[0, size).
void parse_build_id(Module* m, const uint8_t* notes, size_t size) {
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
      uint8_t notes[256];  // the build-id note comes first in practice
      size_t size = ph[i].p_memsz < sizeof notes ? ph[i].p_memsz : sizeof notes;
      if (safe_read(notes, m->bias + ph[i].p_vaddr, size)) parse_build_id(m, notes, size);
    }
  }
  if (lo < hi) {
    m->base = m->bias + (lo & ~static_cast<uintptr_t>(4095));
    m->end = m->bias + hi;
  }
}

}  // namespace

const char* modules_exe_path() {
  // Read when first asked (a readlink of /proc/self/exe is ~40 us of every
  // start on a small VM, and most processes never crash). 0: not read,
  // 1: being read, 2: ready. A caller that finds another thread reading
  // waits a bounded time, then makes do with the path the kernel was asked
  // to execute.
  volatile int& state = g_exe_path_state;
  int expected = 0;
  if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2 &&
      __atomic_compare_exchange_n(&state, &expected, 1, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    // Started through its loader: the file mapped where the program is.
    long n = g_exe_via_loader ? mapped_file_path(g_exe_start, g_exe_path, sizeof g_exe_path - 1)
                              : readlink("/proc/self/exe", g_exe_path, sizeof g_exe_path - 1);
    // A binary replaced while it ran (a package upgrade) reads as
    // "/usr/bin/prog (deleted)": the path it was started from is the one
    // to name (and to group crashes by).
    g_exe_path[n > 0 ? n : 0] = '\0';
    constexpr char kDeleted[] = " (deleted)";
    constexpr long kDeletedLen = sizeof kDeleted - 1;
    if (n > kDeletedLen && str_eq(g_exe_path + n - kDeletedLen, kDeleted)) {
      g_exe_path[n - kDeletedLen] = '\0';
    }
    // No /proc: the path the kernel was asked to execute will do (the
    // program's, as its loader was given it, when started through it).
    if (n <= 0) str_copy(g_exe_path, sizeof g_exe_path, execfn());
    __atomic_store_n(&state, 2, __ATOMIC_RELEASE);
  }
  for (int spins = 0; __atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2; ++spins) {
    if (spins > 1000000) return execfn();
  }
  return g_exe_path;
}

namespace {

// True when the ELF file open at fd carries the module's build-id.
bool file_has_build_id(int fd, const Module& m) {
  ElfW(Ehdr) eh;
  if (pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh)) return false;
  if (!is_elf64(eh) || eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0) return false;
  ElfW(Phdr) ph[64];
  size_t phnum = eh.e_phnum < 64 ? eh.e_phnum : 64;
  ssize_t want = static_cast<ssize_t>(phnum * sizeof ph[0]);
  if (pread(fd, ph, static_cast<size_t>(want), static_cast<off_t>(eh.e_phoff)) != want)
    return false;
  for (size_t i = 0; i < phnum; ++i) {
    if (ph[i].p_type != PT_NOTE) continue;
    uint8_t notes[256];  // the build-id note comes first in practice
    size_t size = ph[i].p_filesz < sizeof notes ? ph[i].p_filesz : sizeof notes;
    ssize_t got = pread(fd, notes, size, static_cast<off_t>(ph[i].p_offset));
    if (got <= 0) continue;
    Module file = {};
    parse_build_id(&file, notes, static_cast<size_t>(got));
    if (file.build_id_len == 0) continue;
    if (file.build_id_len != m.build_id_len) return false;
    for (int k = 0; k < m.build_id_len; ++k) {
      if (file.build_id[k] != m.build_id[k]) return false;
    }
    return true;
  }
  return false;
}

// Set when the kernel refused to open a mapping (EPERM: not root outside a
// container): no more scans of the directory, one per module, in vain.
int g_map_files_denied = 0;

// Calls f(dir, name) for the /proc/self/map_files entry of the mapping
// that starts at start, with dir open; false if there is none.
template <typename F>
bool with_mapped_file(uintptr_t start, F&& f) {
  char dirpath[] = "/proc/self/map_files/";
  int dir = open(dirpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  char hex[24];
  size_t hex_len = fmt_hex(hex, start);  // "0x..."; the kernel writes "%lx-%lx"
  char want[24];
  StrBuf w(want, sizeof want);
  w.add_n(hex + 2, hex_len - 2).add("-");
  bool found = false;
  for_each_dir_entry(dir, [&](const char* name) {
    if (!str_starts_with(name, want)) return false;
    f(dir, name);
    found = true;
    return true;
  });
  close(dir);
  return found;
}

// The module's first mapping as the kernel keeps it, whatever its path now
// holds: /proc/self/map_files/<start>-<end> (opening one needs
// CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE in the initial user namespace:
// root, not in a container). -1 where there is none or it may not be opened.
int open_mapped_file(const Module& m) {
  if (__atomic_load_n(&g_map_files_denied, __ATOMIC_RELAXED)) return -1;
  int fd = -1;
  with_mapped_file(m.base, [&](int dir, const char* name) {
    fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && (errno == EPERM || errno == EACCES)) {
      __atomic_store_n(&g_map_files_denied, 1, __ATOMIC_RELAXED);
    }
  });
  return fd;
}

// The path of the file mapped at start, as /proc/self/map_files reads it
// (reading the link needs no privilege, unlike opening it); its length, or
// -1.
long mapped_file_path(uintptr_t start, char* out, size_t cap) {
  long n = -1;
  with_mapped_file(start, [&](int dir, const char* name) { n = readlinkat(dir, name, out, cap); });
  return n;
}

}  // namespace

int open_module_file(const Module& m, bool* replaced) {
  if (replaced) *replaced = false;
  // Started through its loader, /proc/self/exe is the loader: the program
  // is then opened as a library is, by its path and build-id.
  // Out of process (`faultline dump` by ptrace) /proc/self/exe is faultline's
  // own: the executable is opened by its path and build-id, as a library is.
  const bool exe = m.is_main && !g_exe_via_loader && !safe_read_remote_pid();
  if (exe) {
    // The binary that runs, even if its path now holds another (replaced
    // before or after the path was read).
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) return fd;
  }
  if (!m.path || !m.path[0]) return -1;
  int fd = open(m.path, O_RDONLY | O_CLOEXEC);
  if (exe) return fd;
  bool other = false;
  if (fd >= 0) {
    if (m.build_id_len == 0 || file_has_build_id(fd, m)) return fd;
    // An upgrade replaced the library under the running process: its
    // symbols would name the wrong functions.
    close(fd);
    other = true;
  }
  // Replaced, or gone (deleted, a cleaned cache): the file that was mapped.
  fd = open_mapped_file(m);
  if (fd >= 0 && m.build_id_len != 0 && !file_has_build_id(fd, m)) {
    close(fd);
    fd = -1;
  }
  if (fd < 0 && other && replaced) *replaced = true;
  return fd;
}

FAULTLINE_START_TEXT void modules_init() {
  // getauxval only reads what libc saved at start: no system call.
  const char* execfn = reinterpret_cast<const char*>(getauxval(AT_EXECFN));
  g_execfn = execfn ? execfn : "";
  g_exe_phdr = getauxval(AT_PHDR);
  g_exe_phnum = getauxval(AT_PHNUM);
  g_vdso = getauxval(AT_SYSINFO_EHDR);
  // A dynamic program (it names an interpreter) whose interpreter the
  // kernel did not map (AT_BASE 0) was started by running its loader. Its
  // program headers are mapped memory the loader itself read: read here,
  // at install, not in a signal handler. Stored once (a second install
  // computes the same): a capture on another thread never sees a passing
  // "not through the loader".
  bool via_loader = false;
  uintptr_t start = 0;
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(g_exe_phdr);
  if (getauxval(AT_BASE) == 0 && ph) {
    uintptr_t lo = UINTPTR_MAX;
    for (size_t i = 0; i < g_exe_phnum; ++i) {
      if (ph[i].p_type == PT_INTERP) via_loader = true;
      if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < lo) lo = ph[i].p_vaddr;
    }
    // The program is the link map's first entry; its l_addr is the load
    // bias (no PT_PHDR needed to find it).
    const struct link_map* main_map = _r_debug.r_map;
    if (lo == UINTPTR_MAX || !main_map) via_loader = false;
    uintptr_t page = getauxval(AT_PAGESZ);
    if (page == 0 || (page & (page - 1)) != 0) page = 4096;
    if (via_loader) start = main_map->l_addr + (lo & ~(page - 1));
  }
  if (g_exe_start != start) __atomic_store_n(&g_exe_start, start, __ATOMIC_RELEASE);
  if (g_exe_via_loader != via_loader)
    __atomic_store_n(&g_exe_via_loader, via_loader, __ATOMIC_RELEASE);
}

FAULTLINE_START_TEXT void modules_reset_after_fork() {
  // The thread that was reading the path is not in the child.
  int reading = 1;
  __atomic_compare_exchange_n(&g_exe_path_state, &reading, 0, false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
}

namespace {

// Modules the snapshot did not know, read together: names, ELF headers,
// program headers and notes each in one batch (a few system calls for
// hundreds of modules, not a few per module).
struct Pending {
  int slot;  // index in the table
  uintptr_t l_name;
  char name[256];
  bool name_ok;
  ElfW(Ehdr) eh;
  bool eh_ok;
  ElfW(Phdr) ph[16];
  int phnum;
  bool ph_ok;
  uint8_t notes[256];
  size_t notes_len;
  uint64_t notes_align;
  bool notes_ok;
};

void read_pending(ModuleTable* table, Pending* p, int n, Arena* arena) {
  void** dst = arena->alloc_array<void*>(static_cast<size_t>(n));
  uintptr_t* addr = arena->alloc_array<uintptr_t>(static_cast<size_t>(n));
  size_t* len = arena->alloc_array<size_t>(static_cast<size_t>(n));
  bool* ok = arena->alloc_array<bool>(static_cast<size_t>(n));
  if (!dst || !addr || !len || !ok) return;
  // Names: up to 256 bytes, never past the page the name starts on.
  for (int i = 0; i < n; ++i) {
    dst[i] = p[i].name;
    addr[i] = p[i].l_name;
    size_t page_left = 4096 - (p[i].l_name & 4095);
    len[i] = page_left < sizeof p[i].name ? page_left : sizeof p[i].name;
  }
  safe_read_many(dst, addr, len, ok, n);
  for (int i = 0; i < n; ++i) {
    p[i].name_ok = false;
    if (!ok[i]) continue;
    for (size_t k = 0; k < len[i]; ++k) {
      if (p[i].name[k] == '\0') p[i].name_ok = true;
    }
  }
  // ELF headers at the bias (a library's lowest segment starts at 0).
  for (int i = 0; i < n; ++i) {
    dst[i] = &p[i].eh;
    addr[i] = table->items[p[i].slot].bias;
    len[i] = sizeof p[i].eh;
  }
  safe_read_many(dst, addr, len, ok, n);
  for (int i = 0; i < n; ++i) {
    const ElfW(Ehdr)& eh = p[i].eh;
    p[i].eh_ok = ok[i] && eh.e_ident[0] == ELFMAG0 && eh.e_ident[1] == ELFMAG1 &&
                 eh.e_phentsize == sizeof(ElfW(Phdr));
    p[i].phnum = p[i].eh_ok ? eh.e_phnum : 0;
    if (p[i].phnum > 16) p[i].phnum = 16;  // more: read alone below
    dst[i] = p[i].ph;
    addr[i] = table->items[p[i].slot].bias + (p[i].eh_ok ? eh.e_phoff : 0);
    len[i] = static_cast<size_t>(p[i].phnum) * sizeof(ElfW(Phdr));
  }
  safe_read_many(dst, addr, len, ok, n);
  for (int i = 0; i < n; ++i) {
    Module* m = &table->items[p[i].slot];
    p[i].ph_ok = ok[i] && p[i].phnum > 0;
    p[i].notes_len = 0;
    if (p[i].eh_ok && p[i].eh.e_phnum > 16) {
      read_image(m, m->bias + p[i].eh.e_phoff, p[i].eh.e_phnum);
      p[i].ph_ok = false;
      continue;
    }
    if (!p[i].ph_ok) continue;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int k = 0; k < p[i].phnum; ++k) {
      const ElfW(Phdr)& ph = p[i].ph[k];
      if (ph.p_type == PT_LOAD) {
        if (ph.p_vaddr < lo) lo = ph.p_vaddr;
        if (ph.p_vaddr + ph.p_memsz > hi) hi = ph.p_vaddr + ph.p_memsz;
      } else if (ph.p_type == PT_GNU_EH_FRAME) {
        m->eh_frame_hdr = m->bias + ph.p_vaddr;
      } else if (ph.p_type == PT_NOTE && (!p[i].notes_len || ph.p_align <= 4)) {
        // The build-id is in the 4-aligned note segment (the 8-aligned one,
        // when there are two, holds .note.gnu.property).
        if (p[i].notes_len && p[i].notes_align <= 4) continue;
        addr[i] = m->bias + ph.p_vaddr;
        p[i].notes_len = ph.p_memsz < sizeof p[i].notes ? ph.p_memsz : sizeof p[i].notes;
        p[i].notes_align = ph.p_align;
      }
    }
    if (lo < hi) {
      m->base = m->bias + (lo & ~static_cast<uintptr_t>(4095));
      m->end = m->bias + hi;
    }
  }
  // Notes: the build-id note comes first in practice.
  for (int i = 0; i < n; ++i) {
    dst[i] = p[i].notes;
    len[i] = p[i].ph_ok ? p[i].notes_len : 0;
    if (!len[i]) addr[i] = 0;
  }
  safe_read_many(dst, addr, len, ok, n);
  for (int i = 0; i < n; ++i) {
    Module* m = &table->items[p[i].slot];
    if (ok[i] && len[i]) parse_build_id(m, p[i].notes, len[i]);
    // Not there: every note segment, one by one (rare).
    for (int k = 0; p[i].ph_ok && m->build_id_len == 0 && k < p[i].phnum; ++k) {
      const ElfW(Phdr)& ph = p[i].ph[k];
      if (ph.p_type != PT_NOTE) continue;
      uint8_t notes[256];
      size_t size = ph.p_memsz < sizeof notes ? ph.p_memsz : sizeof notes;
      if (safe_read(notes, m->bias + ph.p_vaddr, size)) parse_build_id(m, notes, size);
    }
  }
}

}  // namespace

bool collect_modules(ModuleTable* table, Arena* arena, CaptureErrors* errors, bool reuse_snapshot,
                     uintptr_t from_node) {
  int first_new = from_node ? table->count : 0;
  uintptr_t lm_addr = from_node;
  if (!from_node) {
    table->count = 0;
    table->truncated = false;
    struct r_debug dbg;
    if (!safe_read_obj(&dbg, reinterpret_cast<uintptr_t>(&_r_debug))) {
      errors->add("modules: _r_debug is not readable");
      return false;
    }
    lm_addr = reinterpret_cast<uintptr_t>(dbg.r_map);
  }
  // Batched reads for up to 512 modules (under 1 MiB of arena); any more
  // are read one by one.
  int max_pending = table->capacity < 512 ? table->capacity : 512;
  Pending* pending = arena->alloc_array<Pending>(static_cast<size_t>(max_pending));
  int npending = 0;
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
        module_snapshot_known(lm_addr, lm.l_addr, reinterpret_cast<uintptr_t>(lm.l_name),
                              reinterpret_cast<uintptr_t>(lm.l_ld), m, arena)) {
      ++table->count;
      lm_addr = reinterpret_cast<uintptr_t>(lm.l_next);
      continue;
    }
    *m = Module{};
    m->bias = lm.l_addr;
    if (g_vdso && lm.l_addr == g_vdso) m->is_vdso = true;
    if (table->count == 0 || !pending || npending >= max_pending) {
      // The first (the executable, named "" and described by auxv), or no
      // room to batch: read alone.
      static char name[4096];  // static: the signal stack may be small
      long len = safe_read_cstr(name, sizeof name, reinterpret_cast<uintptr_t>(lm.l_name));
      if (table->count == 0 && len <= 0) {
        m->is_main = true;
        m->path = arena->dup(modules_exe_path(), sizeof g_exe_path);
        read_image(m, g_exe_phdr, g_exe_phnum);
      } else {
        m->path = len > 0 ? arena->dup(name, sizeof name) : "";
        ElfW(Ehdr) eh;
        if (safe_read_obj(&eh, lm.l_addr) && eh.e_ident[0] == ELFMAG0 && eh.e_ident[1] == ELFMAG1 &&
            eh.e_phentsize == sizeof(ElfW(Phdr))) {
          read_image(m, lm.l_addr + eh.e_phoff, eh.e_phnum);
        }
      }
    } else {
      Pending& p = pending[npending++];
      p.slot = table->count;
      p.l_name = reinterpret_cast<uintptr_t>(lm.l_name);
    }
    ++table->count;  // modules without a mapped range are dropped below
    lm_addr = reinterpret_cast<uintptr_t>(lm.l_next);
  }
  if (npending) read_pending(table, pending, npending, arena);
  for (int i = 0; i < npending; ++i) {
    Module* m = &table->items[pending[i].slot];
    if (pending[i].name_ok) {
      m->path = arena->dup(pending[i].name, sizeof pending[i].name);
    } else {
      static char name[4096];
      long len = safe_read_cstr(name, sizeof name, pending[i].l_name);
      m->path = len > 0 ? arena->dup(name, sizeof name) : "";
    }
  }
  // Keep only modules with a mapped range, in link-map order.
  int kept = first_new;
  for (int i = first_new; i < table->count; ++i) {
    if (table->items[i].end > table->items[i].base) table->items[kept++] = table->items[i];
  }
  table->count = kept;
  return table->count > 0;
}

int find_module(const ModuleTable& table, uintptr_t pc) {
  for (int i = 0; i < table.count; ++i) {
    if (pc >= table.items[i].base && pc < table.items[i].end) return i;
  }
  return -1;
}

}  // namespace faultline::core
