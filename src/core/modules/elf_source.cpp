#include "core/modules/elf_source.h"

namespace faultline::core {

// Finds .symtab and .dynsym (with their string tables), at most two, in that
// order. Returns the count, -1 if `src` is not a 64-bit ELF file.
int find_symtabs(const ElfSource& src, SymTab* out) {
  ElfW(Ehdr) eh;
  if (!src.read(&eh, 0, sizeof eh)) return -1;
  if (!is_elf64(eh) || eh.e_shentsize != sizeof(ElfW(Shdr))) return -1;
  // One pass over the section headers, 16 per read: a read is a system
  // call (~1.5 us in a virtual machine), and a library has 30 to 70 sections.
  constexpr unsigned kPerRead = 16;
  ElfW(Shdr) chunk[kPerRead];
  ElfW(Shdr) tab[2] = {};  // [0]: .symtab, [1]: .dynsym
  bool have[2] = {false, false};
  unsigned shnum = eh.e_shnum;  // 16 bits: at most 65535
  for (unsigned i = 0; i < shnum && !(have[0] && have[1]); i += kPerRead) {
    unsigned take = shnum - i < kPerRead ? shnum - i : kPerRead;
    if (!src.read(chunk, eh.e_shoff + i * sizeof(ElfW(Shdr)), take * sizeof(ElfW(Shdr)))) break;
    for (unsigned k = 0; k < take; ++k) {
      const ElfW(Shdr)& sh = chunk[k];
      if (sh.sh_entsize != sizeof(ElfW(Sym))) continue;
      int which = sh.sh_type == SHT_SYMTAB ? 0 : sh.sh_type == SHT_DYNSYM ? 1 : -1;
      if (which < 0 || have[which]) continue;
      tab[which] = sh;
      have[which] = true;
    }
  }
  // .symtab first: it is a superset of .dynsym when present.
  int found = 0;
  for (int which = 0; which < 2; ++which) {
    if (!have[which]) continue;
    const ElfW(Shdr)& sh = tab[which];
    ElfW(Shdr) strsh;
    if (sh.sh_link >= shnum ||
        !src.read(&strsh, eh.e_shoff + sh.sh_link * sizeof strsh, sizeof strsh)) {
      continue;
    }
    out[found++] = {sh.sh_offset, sh.sh_size, strsh.sh_offset, strsh.sh_size, &src, which == 0};
  }
  return found;
}

namespace {

// The number of symbols in .dynsym from its GNU hash table: one past the
// highest index any bucket's chain reaches (the loader's own tables carry
// no count).
uint64_t gnu_hash_symbol_count(uintptr_t table) {
  uint32_t h[4];  // nbuckets, symoffset, bloom words, bloom shift
  if (!safe_read(h, table, sizeof h) || h[0] == 0 || h[0] > (1u << 20)) return 0;
  uintptr_t buckets = table + sizeof h + uint64_t{h[2]} * sizeof(ElfW(Addr));
  uint32_t top = 0;
  uint32_t chunk[256];
  for (uint32_t i = 0; i < h[0]; i += 256) {
    uint32_t take = h[0] - i < 256 ? h[0] - i : 256;
    if (!safe_read(chunk, buckets + uint64_t{i} * 4, take * 4)) return 0;
    for (uint32_t k = 0; k < take; ++k) top = chunk[k] > top ? chunk[k] : top;
  }
  if (top < h[1]) return h[1];  // every chain empty
  uintptr_t chains = buckets + uint64_t{h[0]} * 4;
  // A chain is a few entries; a table that never ends one is not read on.
  // 64 at a time (the last ones may lie past the table: then one by one).
  uint32_t hashes[64];
  for (uint64_t index = top; index < uint64_t{top} + 4096;) {
    uintptr_t at = chains + (index - h[1]) * 4;
    uint32_t got = safe_read(hashes, at, sizeof hashes) ? 64 : safe_read(hashes, at, 4) ? 1 : 0;
    if (got == 0) return 0;
    for (uint32_t k = 0; k < got; ++k, ++index) {
      if (hashes[k] & 1) return index + 1;  // the chain's last entry
    }
  }
  return 0;
}

}  // namespace

bool read_image_dynamic(uintptr_t base, uintptr_t end, uintptr_t bias, ImageDynamic* out) {
  *out = {};
  if (bias == 0 || end <= base) return false;
  ElfW(Ehdr) eh;
  if (!safe_read(&eh, base, sizeof eh) || !is_elf64(eh) || eh.e_phentsize != sizeof(ElfW(Phdr))) {
    return false;
  }
  ElfW(Phdr) ph[64];
  size_t phnum = eh.e_phnum < 64 ? eh.e_phnum : 64;
  if (phnum == 0 || !safe_read(ph, base + eh.e_phoff, phnum * sizeof ph[0])) return false;
  uintptr_t dyn = 0;
  size_t ndyn = 0;
  for (size_t i = 0; i < phnum; ++i) {
    if (ph[i].p_type != PT_DYNAMIC) continue;
    dyn = bias + ph[i].p_vaddr;
    ndyn = ph[i].p_memsz / sizeof(ElfW(Dyn));
  }
  if (!dyn) return false;
  // The loader rewrites the pointers of a library's dynamic section in
  // place (glibc on x86-64) or leaves them as link-time addresses.
  auto at = [&](uint64_t p) -> uintptr_t {
    if (p >= base && p < end) return p;
    uintptr_t a = bias + p;
    return a >= base && a < end ? a : 0;
  };
  ElfW(Dyn) chunk[32];
  bool done = false;
  for (size_t i = 0; i < ndyn && i < 1024 && !done; i += 32) {
    size_t take = ndyn - i < 32 ? ndyn - i : 32;
    if (!safe_read(chunk, dyn + i * sizeof(ElfW(Dyn)), take * sizeof(ElfW(Dyn)))) return false;
    for (size_t k = 0; k < take && !done; ++k) {
      const ElfW(Dyn)& d = chunk[k];
      switch (d.d_tag) {
        case DT_NULL:
          done = true;
          break;
        case DT_SYMTAB:
          out->symtab = at(d.d_un.d_ptr);
          break;
        case DT_STRTAB:
          out->strtab = at(d.d_un.d_ptr);
          break;
        case DT_STRSZ:
          out->strsz = d.d_un.d_val;
          break;
        case DT_GNU_HASH:
          out->gnu_hash = at(d.d_un.d_ptr);
          break;
        case DT_HASH:
          out->sysv_hash = at(d.d_un.d_ptr);
          break;
        case DT_VERSYM:
          out->versym = at(d.d_un.d_ptr);
          break;
        default:
          break;
      }
    }
  }
  if (!out->symtab || !out->strtab || out->strsz == 0 || out->strsz > end - out->strtab) {
    *out = {};
    return false;
  }
  return true;
}

bool find_image_dynsym(uintptr_t base, uintptr_t end, uintptr_t bias, ElfSource* src, SymTab* out) {
  ImageDynamic dyn;
  if (!read_image_dynamic(base, end, bias, &dyn)) return false;
  uint64_t count = 0;
  uint32_t sysv[2];  // nbucket, nchain: one symbol per chain entry
  if (dyn.sysv_hash && safe_read(sysv, dyn.sysv_hash, sizeof sysv)) count = sysv[1];
  if (count == 0 && dyn.gnu_hash) count = gnu_hash_symbol_count(dyn.gnu_hash);
  // .dynstr follows .dynsym where linkers put them; a count read from a
  // corrupt table is held to that, and to what any library has.
  uint64_t room = ((dyn.strtab > dyn.symtab ? dyn.strtab : end) - dyn.symtab) / sizeof(ElfW(Sym));
  if (count > room) count = room;
  if (count > (1u << 22)) count = 1u << 22;
  if (count == 0) return false;
  src->fd = -1;
  src->mem = bias;
  *out = {dyn.symtab - bias, count * sizeof(ElfW(Sym)), dyn.strtab - bias, dyn.strsz, src, false};
  return true;
}

}  // namespace faultline::core
