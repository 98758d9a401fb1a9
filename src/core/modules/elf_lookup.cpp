#include "core/modules/elf_lookup.h"

#include <fcntl.h>

#include "core/base/safe_read.h"
#include "core/base/str.h"
#include "core/modules/elf_source.h"

namespace faultline::core {
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

// Returns 1 found, 0 not there (the name's chain ended without it), -1
// not known: the table could not be read, the name is too long to compare,
// a chain ran on past 4096 entries, or only a non-default version of the
// name is there. The caller scans the symbol tables after -1, not after 0.
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
  char buf[256];
  if (len + 1 > sizeof buf) return -1;
  bool unsure = false;
  for (int guard = 0; guard < 4096; ++guard, ++index) {
    uint32_t chain_hash = 0;
    if (!src.read(&chain_hash, chains + uint64_t{index - header[1]} * 4, 4)) return -1;
    if ((chain_hash | 1) == (h | 1)) {
      ElfW(Sym) sym;
      if (!src.read(&sym, l.sym_off + uint64_t{index} * sizeof sym, sizeof sym) ||
          sym.st_name >= l.str_size || len >= l.str_size - sym.st_name ||
          !src.read(buf, l.str_off + sym.st_name, len + 1)) {
        unsure = true;  // a symbol whose name cannot be read
      } else if (buf[len] == '\0' && str_eq(buf, name) && sym.st_shndx != SHN_UNDEF) {
        // memcpy@GLIBC_2.2.5 beside memcpy@@GLIBC_2.14: take the default,
        // as the dynamic linker does.
        uint16_t version = 0;
        if (l.versym_off && src.read(&version, l.versym_off + uint64_t{index} * 2, 2) &&
            (version & 0x8000)) {
          unsure = true;
        } else {
          *value = sym.st_value;
          return 1;
        }
      }
    }
    if (chain_hash & 1) return unsure ? -1 : 0;
  }
  return -1;
}

// A window on a string table: the names a scan compares are read 4 KiB at
// a time instead of one read each (a binary of 80,000 symbols took 80,000
// reads, ~100 ms of a crash, to learn that it holds no _PyRuntime). Names
// are laid out about in the order of their symbols, so a scan reads the
// table about once, front to back.
struct NameWindow {
  NameWindow(const ElfSource& s, uint64_t off, uint64_t size)
      : src(s), str_off(off), str_size(size) {}
  const ElfSource& src;
  uint64_t str_off, str_size;
  uint64_t lo = 0, len = 0;  // the window: [lo, lo + len) of the table
  char buf[4096];            // not zeroed: only what was read is looked at

  // The n bytes at offset off of the table; nullptr when they lie outside
  // it or cannot be read.
  const char* at(uint64_t off, size_t n) {
    if (off >= str_size || n > str_size - off || n > sizeof buf) return nullptr;
    if (off < lo || off + n > lo + len) {
      uint64_t take = str_size - off < sizeof buf ? str_size - off : sizeof buf;
      len = 0;  // a failed read may have changed buf
      // A short read near a bad stretch of the file: just this name.
      if (!src.read(buf, str_off + off, take)) {
        take = n;
        if (!src.read(buf, str_off + off, take)) return nullptr;
      }
      lo = off;
      len = take;
    }
    return buf + (off - lo);
  }
};

// Not exported (or no hash table): a scan of the symbol tables; .dynsym
// only when its hash table did not say that the name is not there
// (dynsym_asked).
uintptr_t scan_symtabs(const ElfSource& src, const char* name, bool dynsym_asked) {
  size_t name_len = str_len(name);
  // No symbol is found by an empty name (section symbols have one), nor by
  // one longer than the window compares.
  if (name_len == 0 || name_len + 1 > sizeof NameWindow::buf) return 0;
  SymTab tabs[2];
  int ntabs = find_symtabs(src, tabs);
  ElfW(Sym) syms[kSymChunk];
  for (int t = ntabs - 1; t >= 0; --t) {  // .dynsym (smaller) first
    if (dynsym_asked && !tabs[t].full) continue;
    NameWindow names(src, tabs[t].str_off, tabs[t].str_size);
    uint64_t count = tabs[t].sym_size / sizeof(ElfW(Sym));
    for (uint64_t i = 0; i < count; i += kSymChunk) {
      size_t take = count - i < kSymChunk ? count - i : kSymChunk;
      if (!src.read(syms, tabs[t].sym_off + i * sizeof(ElfW(Sym)), take * sizeof(ElfW(Sym)))) {
        break;
      }
      for (size_t k = 0; k < take; ++k) {
        if (syms[k].st_shndx == SHN_UNDEF) continue;
        // The name and its terminator: it must end exactly there.
        const char* at = names.at(syms[k].st_name, name_len + 1);
        if (at && at[name_len] == '\0' && str_eq(at, name)) return syms[k].st_value;
      }
    }
  }
  return 0;
}

}  // namespace

bool SymbolLookup::open(const Module& module) {
  close();
  bias = module.bias;
  hash_ready = false;
  versym_off = 0;
  if (module.is_vdso || !module.path || !module.path[0]) return false;
  fd = open_module_file(module);
  // Its file is gone or holds another build now: the loaded image's own
  // GNU hash table, always the build that runs (exported symbols only).
  if (fd < 0) return open_image(module);
  ElfSource src;
  src.fd = fd;
  hash_ready = gnu_hash_prepare(src, this);
  return true;
}

bool SymbolLookup::open_image(const Module& module) {
  close();
  bias = module.bias;
  hash_ready = false;
  versym_off = 0;
  ImageDynamic dyn;
  if (module.is_vdso || !read_image_dynamic(module.base, module.end, module.bias, &dyn) ||
      !dyn.gnu_hash || !safe_read(header, dyn.gnu_hash, sizeof header) || header[0] == 0) {
    return false;
  }
  mem = module.bias;
  hash_off = dyn.gnu_hash - mem;
  sym_off = dyn.symtab - mem;
  str_off = dyn.strtab - mem;
  str_size = dyn.strsz;
  versym_off = dyn.versym ? dyn.versym - mem : 0;
  hash_ready = true;
  return true;
}

uintptr_t SymbolLookup::find(const char* name) {
  if (fd < 0 && !mem) return 0;
  ElfSource src;
  src.fd = fd;
  if (fd < 0) src.mem = mem;
  uint64_t value = 0;
  int r = hash_ready ? gnu_hash_find(src, *this, name, &value) : -1;
  if (r == 1) return bias + value;
  if (fd < 0) return 0;  // an image has no section headers to scan
  value = scan_symtabs(src, name, r == 0);
  return value ? bias + value : 0;
}

void SymbolLookup::close() {
  if (fd >= 0) ::close(fd);
  fd = -1;
  mem = 0;
}

uintptr_t lookup_symbol_address(const Module& module, const char* name) {
  SymbolLookup l;
  l.open(module);
  uintptr_t r = l.find(name);
  l.close();
  return r;
}

}  // namespace faultline::core
