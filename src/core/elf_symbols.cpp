#include "core/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include "core/safe_read.h"
#include "core/str.h"
#include "core/symbol_rank.h"

namespace faultline::core {
namespace {

// Mangled C++ names can be long; 1 KiB keeps all but template monsters whole.
constexpr size_t kMaxSymbolName = 1024;

// Where a module's ELF bytes come from: its file, or its image in memory.
struct ElfSource {
  int fd = -1;
  uintptr_t mem = 0;  // vDSO: the loaded image holds the whole file
  bool read(void* dst, uint64_t off, size_t n) const {
    if (fd >= 0) {
      char* out = static_cast<char*>(dst);
      while (n > 0) {
        ssize_t r = pread(fd, out, n, static_cast<off_t>(off));
        if (r <= 0) return false;
        out += r;
        off += static_cast<uint64_t>(r);
        n -= static_cast<size_t>(r);
      }
      return true;
    }
    return mem && safe_read(dst, mem + off, n);
  }
};

struct SymTab {
  uint64_t sym_off, sym_size, str_off, str_size;
  const ElfSource* src;
  bool full;  // .symtab (all functions), not .dynsym (exported ones)
};

// Finds .symtab and .dynsym (with their string tables), at most two, in that
// order. Returns the count, -1 if `src` is not a 64-bit ELF file.
int find_symtabs(const ElfSource& src, SymTab* out) {
  ElfW(Ehdr) eh;
  if (!src.read(&eh, 0, sizeof eh)) return -1;
  if (eh.e_ident[EI_MAG0] != ELFMAG0 || eh.e_ident[EI_MAG1] != ELFMAG1 ||
      eh.e_ident[EI_MAG2] != ELFMAG2 || eh.e_ident[EI_MAG3] != ELFMAG3 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(ElfW(Shdr))) {
    return -1;
  }
  int found = 0;
  // .symtab first: it is a superset of .dynsym when present.
  static const uint32_t kWanted[] = {SHT_SYMTAB, SHT_DYNSYM};
  for (uint32_t want : kWanted) {
    for (unsigned i = 0; i < eh.e_shnum && i < 65536; ++i) {
      ElfW(Shdr) sh;
      if (!src.read(&sh, eh.e_shoff + i * sizeof sh, sizeof sh)) return found;
      if (sh.sh_type != want || sh.sh_entsize != sizeof(ElfW(Sym))) continue;
      ElfW(Shdr) strsh;
      if (sh.sh_link >= eh.e_shnum ||
          !src.read(&strsh, eh.e_shoff + sh.sh_link * sizeof strsh, sizeof strsh)) {
        continue;
      }
      out[found++] = {sh.sh_offset,  sh.sh_size, strsh.sh_offset,
                      strsh.sh_size, &src,       want == SHT_SYMTAB};
      break;
    }
  }
  return found;
}

bool is_code_symbol(const ElfW(Sym) & s) {
  int type = ELF64_ST_TYPE(s.st_info);
  return s.st_shndx != SHN_UNDEF && s.st_value != 0 &&
         (type == STT_FUNC || type == STT_GNU_IFUNC || (type == STT_NOTYPE && s.st_size > 0));
}

struct Best {
  uint64_t value;
  uint64_t size;
  uint32_t name;
  int table;   // -1: none
  bool exact;  // pc inside [value, value+size)
  int rank;    // symbol_binding_rank of the symbol
};

// Symbols are read 256 at a time (6 KiB of stack).
constexpr size_t kSymChunk = 256;

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

// Heapsort of addrs with frames alongside: O(n log n) and no memory, for
// up to 256 threads x 256 frames in one module.
void sift_down(uint64_t* a, NativeFrame** f, int root, int n) {
  for (;;) {
    int child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && a[child + 1] > a[child]) ++child;
    if (a[root] >= a[child]) return;
    uint64_t ta = a[root];
    a[root] = a[child];
    a[child] = ta;
    NativeFrame* tf = f[root];
    f[root] = f[child];
    f[child] = tf;
    root = child;
  }
}

void sort_by_address(uint64_t* a, NativeFrame** f, int n) {
  for (int i = n / 2 - 1; i >= 0; --i) sift_down(a, f, i, n);
  for (int end = n - 1; end > 0; --end) {
    uint64_t ta = a[0];
    a[0] = a[end];
    a[end] = ta;
    NativeFrame* tf = f[0];
    f[0] = f[end];
    f[end] = tf;
    sift_down(a, f, 0, end);
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
      uint64_t end = s.st_size > 0 ? s.st_value + s.st_size : s.st_value + kUnsizedReach;
      for (int f = lower_bound(addrs, n, s.st_value); f < n && addrs[f] < end; ++f) {
        uint64_t a = addrs[f];
        bool inside = s.st_size > 0 && a < s.st_value + s.st_size;
        Best& b = best[f];
        // An exact (sized) match beats a nearest-below one; among exact
        // matches of one table the innermost, and at one address the
        // best-ranked binding.
        int rank = symbol_binding_rank(ELF64_ST_BIND(s.st_info));
        if (inside) {
          if (!b.exact || (b.table == table_index &&
                           (s.st_value > b.value || (s.st_value == b.value && rank > b.rank)))) {
            b = {s.st_value, s.st_size, s.st_name, table_index, true, rank};
          }
        } else if (!b.exact && s.st_size == 0 && (b.table < 0 || s.st_value > b.value)) {
          b = {s.st_value, 0, s.st_name, table_index, false, rank};
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
    again[k] = {0, 0, 0, -1, false, 0};
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

// The separate debug file of a stripped module, found by its build-id where
// Debian's -dbg and -dbgsym packages put it:
// /usr/lib/debug/.build-id/xx/rest.debug. Its .symtab names the local
// functions the module's .dynsym leaves out (start_thread, msort_with_tmp).
// Returns an open descriptor or -1.
constexpr char kDebugIdDir[] = "/usr/lib/debug/.build-id/";

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
  if (module.is_vdso) {
    src.mem = module.bias;
  } else if (module.path && module.path[0]) {
    src.fd = open(module.path, O_RDONLY | O_CLOEXEC);
  }
  if (src.fd < 0 && !src.mem) {
    errors->add("symbols: a module file could not be opened (frames left unnamed)");
    return false;
  }
  // The debug file's .symtab first when the module has none of its own,
  // then the module's tables.
  SymTab tabs[3];
  ElfSource debug;
  int ntabs = 0;
  SymTab own[2];
  int nown = find_symtabs(src, own);
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
  // All of the module's frames at once, sorted by address (arena memory);
  // if the arena is short, 64 at a time from static scratch.
  constexpr int kBatch = 64;
  static uint64_t batch_addrs[kBatch];
  static Best batch_best[kBatch];
  static NativeFrame* batch_frames[kBatch];
  uint64_t* addrs = arena->alloc_array<uint64_t>(static_cast<size_t>(n));
  Best* best = arena->alloc_array<Best>(static_cast<size_t>(n));
  NativeFrame** sorted = arena->alloc_array<NativeFrame*>(static_cast<size_t>(n));
  int step = n;
  if (!addrs || !best || !sorted) {
    addrs = batch_addrs;
    best = batch_best;
    sorted = batch_frames;
    step = kBatch;
  }
  for (int start = 0; start < n; start += step) {
    int m = n - start < step ? n - start : step;
    for (int f = 0; f < m; ++f) {
      const NativeFrame* fr = frames[start + f];
      // A return address may be one past a noreturn call: look up pc-1.
      uintptr_t pc = fr->signal_frame ? fr->pc : fr->pc - 1;
      addrs[f] = pc - module.bias;
      sorted[f] = frames[start + f];
      best[f] = {0, 0, 0, -1, false, 0};
    }
    sort_by_address(addrs, sorted, m);
    for (int t = 0; t < ntabs; ++t) {
      // Stop early when every frame has an exact match from .symtab.
      bool all_exact = true;
      for (int f = 0; f < m; ++f) all_exact = all_exact && best[f].exact;
      if (all_exact) break;
      scan_table(tabs[t], t, addrs, best, m);
    }
    recheck_sigreturn(tabs, ntabs, sorted, best, m, module.bias);
    for (int f = 0; f < m; ++f) {
      const Best& b = best[f];
      if (b.table < 0) continue;
      const SymTab& t = tabs[b.table];
      if (b.name >= t.str_size) continue;
      NativeFrame* frame = sorted[f];
      CachedName& slot =
          cache[(b.name * 2654435761u + static_cast<uint32_t>(b.table)) % kCacheSlots];
      if (slot.table == b.table && slot.offset == b.name && slot.name) {
        frame->symbol = slot.name;
        frame->symbol_offset = (frame->pc - module.bias) - b.value;
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
      frame->symbol = arena->dup(name, got);
      frame->symbol_offset = (frame->pc - module.bias) - b.value;
      slot = {b.table, b.name, frame->symbol};
    }
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
    int n = 0;
    for (int t = 0; t < nthreads; ++t) {
      for (int f = 0; f < threads[t].nframes && n < kMaxPerModule; ++f) {
        if (threads[t].frames[f].module == mi) group[n++] = &threads[t].frames[f];
      }
    }
    if (n) symbolize_module_frames(modules.items[mi], group, n, arena, errors);
  }
}

namespace {

// The section headers from `first` on, 16 at a time (one read for most
// modules instead of one per header).
struct ShdrReader {
  const ElfSource& src;
  const ElfW(Ehdr) & eh;
  ElfW(Shdr) buf[16];
  unsigned lo = 0, n = 0;
  bool get(unsigned i, ElfW(Shdr) * out) {
    if (i >= eh.e_shnum) return false;
    if (i < lo || i >= lo + n) {
      unsigned take = eh.e_shnum - i < 16 ? eh.e_shnum - i : 16;
      if (!src.read(buf, eh.e_shoff + uint64_t{i} * sizeof(ElfW(Shdr)), take * sizeof(ElfW(Shdr))))
        return false;
      lo = i;
      n = take;
    }
    *out = buf[i - lo];
    return true;
  }
};

// Finds .dynsym's GNU hash table (a lookup by name in a few reads instead of
// a scan of every symbol: thousands of reads for libpython at start-up).
bool gnu_hash_prepare(const ElfSource& src, SymbolLookup* l) {
  ElfW(Ehdr) eh;
  if (!src.read(&eh, 0, sizeof eh) || eh.e_shentsize != sizeof(ElfW(Shdr))) return false;
  ShdrReader shdrs{src, eh, {}};
  ElfW(Shdr) hash_sh = {}, sym_sh = {}, str_sh = {};
  bool found = false;
  for (unsigned i = 0; i < eh.e_shnum && i < 65536; ++i) {
    ElfW(Shdr) sh;
    if (!shdrs.get(i, &sh)) return false;
    if (sh.sh_type == SHT_GNU_HASH && !found) {
      hash_sh = sh;
      found = true;
    } else if (sh.sh_type == SHT_GNU_versym) {
      l->versym_off = sh.sh_offset;  // .gnu.version: marks the non-default versions
    }
  }
  if (!found || !shdrs.get(hash_sh.sh_link, &sym_sh) || !shdrs.get(sym_sh.sh_link, &str_sh) ||
      !src.read(l->header, hash_sh.sh_offset, sizeof l->header) || l->header[0] == 0) {
    return false;
  }
  l->hash_off = hash_sh.sh_offset;
  l->sym_off = sym_sh.sh_offset;
  l->str_off = str_sh.sh_offset;
  l->str_size = str_sh.sh_size;
  return true;
}

// Returns 1 found, 0 not there, -1 the table could not be read.
int gnu_hash_find(const ElfSource& src, const SymbolLookup& l, const char* name, uint64_t* value) {
  const uint32_t* header = l.header;  // nbuckets, symoffset, bloom words, bloom shift
  uint32_t h = 5381;
  for (const char* p = name; *p; ++p) h = h * 33 + static_cast<unsigned char>(*p);
  uint64_t buckets = l.hash_off + sizeof l.header + uint64_t{header[2]} * sizeof(ElfW(Addr));
  uint64_t chains = buckets + uint64_t{header[0]} * 4;
  uint32_t index = 0;
  if (!src.read(&index, buckets + (h % header[0]) * 4, 4)) return -1;
  if (index < header[1]) return 0;
  size_t len = str_len(name);
  for (int guard = 0; guard < 4096; ++guard, ++index) {
    uint32_t chain_hash = 0;
    if (!src.read(&chain_hash, chains + uint64_t{index - header[1]} * 4, 4)) return -1;
    if ((chain_hash | 1) == (h | 1)) {
      ElfW(Sym) sym;
      char buf[256];
      if (len + 1 <= sizeof buf &&
          src.read(&sym, l.sym_off + uint64_t{index} * sizeof sym, sizeof sym) &&
          sym.st_name + len < l.str_size && src.read(buf, l.str_off + sym.st_name, len + 1) &&
          buf[len] == '\0' && str_eq(buf, name) && sym.st_shndx != SHN_UNDEF) {
        // memcpy@GLIBC_2.2.5 beside memcpy@@GLIBC_2.14: take the default,
        // as the dynamic linker does.
        uint16_t version = 0;
        if (l.versym_off && src.read(&version, l.versym_off + uint64_t{index} * 2, 2) &&
            (version & 0x8000)) {
          if (chain_hash & 1) break;
          continue;
        }
        *value = sym.st_value;
        return 1;
      }
    }
    if (chain_hash & 1) break;
  }
  return 0;
}

// Not exported (or no hash table): a scan of the symbol tables.
uintptr_t scan_symtabs(const ElfSource& src, const char* name) {
  SymTab tabs[2];
  int ntabs = find_symtabs(src, tabs);
  size_t name_len = str_len(name);
  ElfW(Sym) syms[kSymChunk];
  for (int t = ntabs - 1; t >= 0; --t) {  // .dynsym (smaller) first
    uint64_t count = tabs[t].sym_size / sizeof(ElfW(Sym));
    for (uint64_t i = 0; i < count; i += kSymChunk) {
      size_t take = count - i < kSymChunk ? count - i : kSymChunk;
      if (!src.read(syms, tabs[t].sym_off + i * sizeof(ElfW(Sym)), take * sizeof(ElfW(Sym)))) {
        break;
      }
      for (size_t k = 0; k < take; ++k) {
        if (syms[k].st_shndx == SHN_UNDEF || syms[k].st_name >= tabs[t].str_size) continue;
        char buf[128];
        if (name_len + 1 > sizeof buf) return 0;
        if (!src.read(buf, tabs[t].str_off + syms[k].st_name, name_len + 1)) continue;
        buf[name_len] = buf[name_len] ? 1 : 0;  // must end exactly there
        if (buf[name_len] == 0 && str_eq(buf, name)) return syms[k].st_value;
      }
    }
  }
  return 0;
}

}  // namespace

bool SymbolLookup::open(const Module& module, bool exported) {
  close();
  exported_only = exported;
  bias = module.bias;
  hash_ready = false;
  versym_off = 0;
  if (module.is_vdso || !module.path || !module.path[0]) return false;
  fd = ::open(module.path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ElfSource src;
  src.fd = fd;
  hash_ready = gnu_hash_prepare(src, this);
  return true;
}

uintptr_t SymbolLookup::find(const char* name) {
  if (fd < 0) return 0;
  ElfSource src;
  src.fd = fd;
  uint64_t value = 0;
  int r = hash_ready ? gnu_hash_find(src, *this, name, &value) : -1;
  if (r == 1) return bias + value;
  if (exported_only) return 0;
  value = scan_symtabs(src, name);
  return value ? bias + value : 0;
}

void SymbolLookup::close() {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

uintptr_t lookup_symbol_address(const Module& module, const char* name) {
  SymbolLookup l;
  l.open(module, false);
  uintptr_t r = l.find(name);
  l.close();
  return r;
}

}  // namespace faultline::core
