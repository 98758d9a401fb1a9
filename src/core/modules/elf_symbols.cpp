#include "core/modules/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include "core/base/safe_read.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/handler_state.h"
#include "core/modules/elf_plt.h"
#include "core/modules/elf_source.h"
#include "core/modules/symbol_rank.h"

namespace faultline::core {
namespace {

// Mangled C++ names can be long; 1 KiB keeps all but template monsters whole.
constexpr size_t kMaxSymbolName = 1024;

bool is_code_symbol(const ElfW(Sym) & s) {
  int type = ELF64_ST_TYPE(s.st_info);
  return s.st_shndx != SHN_UNDEF && s.st_value != 0 &&
         (type == STT_FUNC || type == STT_GNU_IFUNC || (type == STT_NOTYPE && s.st_size > 0));
}

struct Best {
  uint64_t value;
  uint64_t size;
  uint32_t name;
  int table;        // -1: none
  bool exact;       // pc inside [value, value+size)
  int rank;         // symbol_binding_rank of the symbol
  unsigned shndx;   // the symbol's section
  uint64_t below;   // the highest start of any code symbol at or below the pc
  const char* plt;  // no symbol: the PLT stub's name (arena), its start in `value`
};

// The symbol chunk buffer: static, not on the (possibly small) signal
// stack; only the owner of a crash symbolizes.
ElfW(Sym) g_syms[kSymChunk];

// First index in sorted addrs[0..n) with addrs[i] >= v.
int lower_bound(const uint64_t* addrs, int n, uint64_t v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (addrs[mid] < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// An unsized symbol (an assembler label) names the addresses after it up to
// this far, when nothing sized covers them.
constexpr uint64_t kUnsizedReach = 64 * 1024;

// The address a frame is looked up at, relative to the module: a return
// address may be one past a noreturn call, so pc-1 unless the pc is exact.
// The low bit of the key keeps exact and return-address frames apart (their
// sigreturn recheck differs).
uint64_t lookup_key(const NativeFrame* f, uintptr_t bias) {
  uint64_t pc = f->signal_frame ? f->pc : f->pc - 1;
  return ((pc - bias) << 1) | (f->signal_frame ? 1u : 0u);
}

// Heapsort of frame pointers by lookup key: O(n log n) and no memory, for
// up to 256 threads x 256 frames in one module.
void sift_down(NativeFrame** f, uintptr_t bias, int root, int n) {
  for (;;) {
    int child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && lookup_key(f[child + 1], bias) > lookup_key(f[child], bias)) ++child;
    if (lookup_key(f[root], bias) >= lookup_key(f[child], bias)) return;
    NativeFrame* tf = f[root];
    f[root] = f[child];
    f[child] = tf;
    root = child;
  }
}

void sort_by_key(NativeFrame** f, uintptr_t bias, int n) {
  for (int i = n / 2 - 1; i >= 0; --i) sift_down(f, bias, i, n);
  for (int end = n - 1; end > 0; --end) {
    NativeFrame* tf = f[0];
    f[0] = f[end];
    f[end] = tf;
    sift_down(f, bias, 0, end);
  }
}

// One pass over a symbol table for all of a module's frames: addrs is
// sorted, so each symbol finds the frames it covers by binary search
// (symbols x log frames, not symbols x frames: libtorch has 100,000+).
void scan_table(const SymTab& t, int table_index, const uint64_t* addrs, Best* best, int n) {
  const ElfSource& src = *t.src;
  ElfW(Sym)* syms = g_syms;
  uint64_t count = t.sym_size / sizeof(ElfW(Sym));
  for (uint64_t i = 0; i < count; i += kSymChunk) {
    size_t take = count - i < kSymChunk ? count - i : kSymChunk;
    if (!src.read(syms, t.sym_off + i * sizeof(ElfW(Sym)), take * sizeof(ElfW(Sym)))) return;
    for (size_t k = 0; k < take; ++k) {
      const ElfW(Sym)& s = syms[k];
      if (!is_code_symbol(s)) continue;
      // Every symbol marks the addresses up to kUnsizedReach after it as
      // having a symbol at or below them: an unsized one before it names
      // none of them.
      uint64_t end = s.st_value + (s.st_size > kUnsizedReach ? s.st_size : kUnsizedReach);
      for (int f = lower_bound(addrs, n, s.st_value); f < n && addrs[f] < end; ++f) {
        uint64_t a = addrs[f];
        bool inside = s.st_size > 0 && a < s.st_value + s.st_size;
        Best& b = best[f];
        if (s.st_value > b.below) b.below = s.st_value;
        // An exact (sized) match beats a nearest-below one; among exact
        // matches of one table the innermost, and at one address the
        // best-ranked binding.
        int rank = symbol_binding_rank(ELF64_ST_BIND(s.st_info));
        if (inside) {
          if (!b.exact || (b.table == table_index &&
                           (s.st_value > b.value || (s.st_value == b.value && rank > b.rank)))) {
            b = {s.st_value, s.st_size,  s.st_name, table_index, true,
                 rank,       s.st_shndx, b.below,   nullptr};
          }
        } else if (!b.exact && s.st_size == 0 && (b.table < 0 || s.st_value > b.value)) {
          b = {s.st_value, 0, s.st_name, table_index, false, rank, s.st_shndx, b.below, nullptr};
        }
      }
    }
  }
}

// The kernel's sigreturn trampoline on x86-64 (glibc's __restore_rt):
// mov $15, %rax; syscall.
bool at_sigreturn(uintptr_t pc) {
  static const unsigned char kCode[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  unsigned char code[sizeof kCode];
  if (!safe_read(code, pc, sizeof code)) return false;
  for (size_t i = 0; i < sizeof code; ++i)
    if (code[i] != kCode[i]) return false;
  return true;
}

// A signal handler returns to the first byte of the sigreturn trampoline,
// the start of a function: its pc-1 is in no symbol or at the end of the one
// before. Such frames whose code is the trampoline's are looked up again at
// their exact pc (a second pass over the tables, only when one is there).
void recheck_sigreturn(const SymTab* tabs, int ntabs, NativeFrame** frames, Best* best, int n,
                       uintptr_t bias) {
  constexpr int kMax = 8;
  int which[kMax];
  uint64_t addrs[kMax];  // ascending, as frames are sorted by address
  Best again[kMax];
  int k = 0;
  for (int f = 0; f < n && k < kMax; ++f) {
    const NativeFrame* fr = frames[f];
    if (fr->signal_frame) continue;
    uint64_t pc = fr->pc - bias;
    const Best& b = best[f];
    if (b.exact && b.value + b.size != pc) continue;
    if (!at_sigreturn(fr->pc)) continue;
    which[k] = f;
    addrs[k] = pc;
    again[k] = {0, 0, 0, -1, false, 0, 0, 0, nullptr};
    ++k;
  }
  if (k == 0) return;
  for (int t = 0; t < ntabs; ++t) scan_table(tabs[t], t, addrs, again, k);
  // __restore_rt is an unsized assembler symbol: one that starts at the pc
  // names it too.
  for (int i = 0; i < k; ++i)
    if (again[i].table >= 0 && (again[i].exact || again[i].value == addrs[i]))
      best[which[i]] = again[i];
}

bool read_source(const void* ctx, void* dst, uint64_t off, size_t n) {
  return static_cast<const ElfSource*>(ctx)->read(dst, off, n);
}

// What the tables left without a sized symbol, gdb's way: an unsized symbol
// (an assembler label, `_init`) names the code after it only up to the next
// symbol and within its own section, so `_init` in .init does not name the
// PLT after it; code no symbol names may be a PLT stub ("strlen@plt", named
// from the module file's relocations: elf_plt.h). Sections are checked where
// their headers can be read: a file, or the vDSO's image (not a loaded
// image's dynamic symbols, whose file is gone).
void settle_unnamed(const SymTab* tabs, const ElfSource& module_file, bool vdso,
                    const uint64_t* addrs, Best* best, int n, Arena* arena) {
  static char name[kMaxSymbolName];
  for (int u = 0; u < n; ++u) {
    Best& b = best[u];
    if (b.exact) continue;
    if (b.table >= 0) {
      const ElfSource& src = *tabs[b.table].src;
      ElfReader r{read_source, &src};
      bool has_sections = src.fd >= 0 || vdso;
      if (b.value < b.below || (has_sections && !section_holds(r, b.shndx, addrs[u]))) b.table = -1;
    }
    if (b.table >= 0 || module_file.fd < 0) continue;
    uint64_t start = 0;
    ElfReader r{read_source, &module_file};
    if (!plt_stub_name(r, addrs[u], name, sizeof name, &start)) continue;
    size_t len = 0;
    while (name[len]) ++len;
    b.plt = arena->dup(name, len);
    b.value = start;
  }
}

// The separate debug file of a stripped module, found by its build-id where
// Debian's -dbg and -dbgsym packages put it:
// /usr/lib/debug/.build-id/xx/rest.debug. Its .symtab names the local
// functions the module's .dynsym leaves out (start_thread, msort_with_tmp).
// Returns an open descriptor or -1.
constexpr char kDebugIdDir[] = "/usr/lib/debug/.build-id/";

// The offset first: a jump out of the phase (a fault, the watchdog) between
// the two stores leaves no name with another symbol's offset.
void name_frame(NativeFrame* frame, const char* symbol, uint64_t offset) {
  frame->symbol_offset = offset;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  frame->symbol = symbol;
}

int open_debug_file(const Module& module) {
  if (module.build_id_len < 2 || module.build_id_len > sizeof module.build_id) return -1;
  static const char kHex[] = "0123456789abcdef";
  char path[sizeof kDebugIdDir + 2 * sizeof module.build_id + 8];
  size_t n = 0;
  for (const char* p = kDebugIdDir; *p; ++p) path[n++] = *p;
  for (int i = 0; i < module.build_id_len; ++i) {
    path[n++] = kHex[module.build_id[i] >> 4];
    path[n++] = kHex[module.build_id[i] & 15];
    if (i == 0) path[n++] = '/';
  }
  for (const char* p = ".debug"; *p; ++p) path[n++] = *p;
  path[n] = '\0';
  return open(path, O_RDONLY | O_CLOEXEC);
}

}  // namespace

bool symbolize_module_frames(const Module& module, NativeFrame** frames, int n, Arena* arena,
                             CaptureErrors* errors) {
  if (n <= 0) return true;
  ElfSource src;
  bool replaced = false;
  if (module.is_vdso) {
    src.mem = module.bias;
  } else if (module.path && module.path[0]) {
    src.fd = open_module_file(module, &replaced);
  }
  // No file to read: gone (deleted, a cleaned cache), unreadable, or its
  // path now holds another build.
  bool no_file = src.fd < 0 && !src.mem;
  // The debug file's .symtab first when the module has none of its own,
  // then the module's tables.
  SymTab tabs[3];
  ElfSource debug;
  int ntabs = 0;
  SymTab own[2];
  int nown = no_file ? 0 : find_symtabs(src, own);
  if (nown < 0) {
    if (src.fd >= 0) close(src.fd);
    return false;
  }
  if (!module.is_vdso && (nown == 0 || !own[0].full)) {
    debug.fd = open_debug_file(module);
    SymTab dbg[2];
    if (debug.fd >= 0 && find_symtabs(debug, dbg) > 0 && dbg[0].full) tabs[ntabs++] = dbg[0];
  }
  for (int i = 0; i < nown; ++i) tabs[ntabs++] = own[i];
  if (no_file && ntabs == 0) {
    // The loaded image's own exported symbols, from its dynamic section: no
    // file needed, and always the build that runs.
    if (find_image_dynsym(module.base, module.end, module.bias, &src, &tabs[0])) ntabs = 1;
    if (replaced) {
      errors->add(ntabs ? "symbols: a module's file was replaced on disk since it was loaded (its "
                          "build-id differs); its frames named from the loaded image's exported "
                          "symbols"
                        : "symbols: a module's file was replaced on disk since it was loaded (its "
                          "build-id differs); its frames left unnamed");
    } else {
      errors->add(ntabs ? "symbols: a module file could not be opened; its frames named from the "
                          "loaded image's exported symbols"
                        : "symbols: a module file could not be opened (frames left unnamed)");
    }
    if (ntabs == 0) {
      if (debug.fd >= 0) close(debug.fd);
      return false;
    }
  }
  if (ntabs == 0) {
    if (src.fd >= 0) close(src.fd);
    if (debug.fd >= 0) close(debug.fd);
    return true;  // no symbol tables at all is not an error
  }
  // Names already read in this module, by (table, string offset): a deep
  // recursion or many threads in the same functions read each name once.
  struct CachedName {
    int table;
    uint32_t offset;
    const char* name;
  };
  constexpr int kCacheSlots = 256;
  static CachedName cache[kCacheSlots];  // static: the signal stack may be small
  for (CachedName& e : cache) e = {-1, 0, nullptr};
  // The frames sorted in place by address, so the frames of one address
  // (a deep recursion, many threads in one function) are looked up once:
  // a 64-thread capture has 3,000 frames in a program and a dozen distinct
  // addresses. The distinct ones go through the tables together (arena
  // memory); if the arena is short, 64 at a time from static scratch.
  sort_by_key(frames, module.bias, n);
  int nkeys = 0;
  for (int f = 0; f < n; ++f) {
    if (f == 0 || lookup_key(frames[f], module.bias) != lookup_key(frames[f - 1], module.bias))
      ++nkeys;
  }
  constexpr int kBatch = 64;
  static uint64_t batch_addrs[kBatch];
  static Best batch_best[kBatch];
  static NativeFrame* batch_frames[kBatch];
  // One block, all or nothing: what is left of a short arena stays for
  // the names.
  size_t each = sizeof(Best) + sizeof(uint64_t) + sizeof(NativeFrame*);
  char* block = static_cast<char*>(arena->alloc(each * static_cast<size_t>(nkeys), alignof(Best)));
  Best* best = batch_best;
  uint64_t* addrs = batch_addrs;
  NativeFrame** first = batch_frames;
  int step = kBatch;
  if (block) {
    size_t k = static_cast<size_t>(nkeys);
    best = reinterpret_cast<Best*>(block);
    addrs = reinterpret_cast<uint64_t*>(block + sizeof(Best) * k);
    first = reinterpret_cast<NativeFrame**>(block + (sizeof(Best) + sizeof(uint64_t)) * k);
    step = nkeys;
  }
  int next_frame = 0;  // the first frame not yet named
  while (next_frame < n) {
    // Up to `step` distinct addresses, from next_frame on.
    int m = 0;
    int end = next_frame;
    for (; end < n; ++end) {
      uint64_t key = lookup_key(frames[end], module.bias);
      if (m > 0 && key == lookup_key(first[m - 1], module.bias)) continue;
      if (m == step) break;
      first[m] = frames[end];
      addrs[m] = key >> 1;
      best[m] = {0, 0, 0, -1, false, 0, 0, 0, nullptr};
      ++m;
    }
    for (int t = 0; t < ntabs; ++t) {
      // Stop early when every address has an exact match from .symtab.
      bool all_exact = true;
      for (int f = 0; f < m; ++f) all_exact = all_exact && best[f].exact;
      if (all_exact) break;
      scan_table(tabs[t], t, addrs, best, m);
    }
    recheck_sigreturn(tabs, ntabs, first, best, m, module.bias);
    settle_unnamed(tabs, src, module.is_vdso, addrs, best, m, arena);
    int u = -1;
    for (int f = next_frame; f < end; ++f) {
      NativeFrame* frame = frames[f];
      if (u < 0 || lookup_key(frame, module.bias) != lookup_key(first[u], module.bias)) ++u;
      const Best& b = best[u];
      if (b.plt) {
        name_frame(frame, b.plt, (frame->pc - module.bias) - b.value);
        continue;
      }
      if (b.table < 0) continue;
      const SymTab& t = tabs[b.table];
      if (b.name >= t.str_size) continue;
      CachedName& slot =
          cache[(b.name * 2654435761u + static_cast<uint32_t>(b.table)) % kCacheSlots];
      if (slot.table == b.table && slot.offset == b.name && slot.name) {
        name_frame(frame, slot.name, (frame->pc - module.bias) - b.value);
        continue;
      }
      static char name[kMaxSymbolName];
      size_t want = t.str_size - b.name < sizeof name - 1 ? t.str_size - b.name : sizeof name - 1;
      // Read in pieces, so a name near the end of the file still works.
      size_t got = 0;
      while (got < want) {
        size_t piece = want - got < 256 ? want - got : 256;
        if (!t.src->read(name + got, t.str_off + b.name + got, piece)) break;
        size_t z = 0;
        while (z < piece && name[got + z]) ++z;
        got += z;
        if (z < piece) break;
      }
      name[got] = '\0';
      // A debug file's .symtab spells versioned symbols "clock_gettime@@GLIBC_2.17";
      // the name is the part before the version, as .dynsym has it.
      for (size_t i = 0; i < got; ++i) {
        if (name[i] == '@') {
          got = i;
          name[got] = '\0';
          break;
        }
      }
      if (got == 0) continue;
      name_frame(frame, arena->dup(name, got), (frame->pc - module.bias) - b.value);
      slot = {b.table, b.name, frame->symbol};
    }
    next_frame = end;
  }
  if (src.fd >= 0) close(src.fd);
  if (debug.fd >= 0) close(debug.fd);
  return true;
}

void symbolize_threads(const ModuleTable& modules, ThreadCapture* threads, int nthreads,
                       Arena* arena, CaptureErrors* errors) {
  // Pointers to the frames of one module, gathered across all threads.
  constexpr int kMaxPerModule = 4096;
  NativeFrame** group = arena->alloc_array<NativeFrame*>(kMaxPerModule);
  if (!group) {
    errors->add("symbols: arena exhausted");
    return;
  }
  for (int mi = 0; mi < modules.count; ++mi) {
    // After the watchdog's first stage the symbols still run, within a
    // budget: the rest of the grace period is the report's.
    if (uint64_t fired = watchdog_fired_ns(); fired && monotonic_ns() - fired > kLateSymbolsNs) {
      errors->add("symbols: out of time (watchdog); the remaining modules' frames left unnamed");
      return;
    }
    int n = 0;
    for (int t = 0; t < nthreads; ++t) {
      for (int f = 0; f < threads[t].nframes && n < kMaxPerModule; ++f) {
        if (threads[t].frames[f].module == mi) group[n++] = &threads[t].frames[f];
      }
    }
    if (n) symbolize_module_frames(modules.items[mi], group, n, arena, errors);
  }
}

}  // namespace faultline::core
