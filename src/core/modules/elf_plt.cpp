#include "core/modules/elf_plt.h"

#include <elf.h>
#include <unistd.h>

namespace faultline::core {
namespace {

// Section headers looked at: more than any module has (libtorch: ~40).
constexpr unsigned kMaxSections = 4096;
// Relocations looked at per section for one stub. .rela.plt has one per
// imported function (libtorch_cpu: ~10,000); .rela.dyn can hold a million
// relative ones, and the slot of a .plt.got stub is looked for among its
// last 64 Ki only (the linker sorts the symbol ones after the relative ones).
constexpr uint64_t kMaxRelocs = 64 * 1024;
// Relocations read per pread: 1.5 KiB of stack.
constexpr unsigned kRelocChunk = 64;

struct File {
  const ElfReader& r;
  Elf64_Ehdr eh;
  bool read(void* dst, uint64_t off, size_t n) const { return r.read(r.ctx, dst, off, n); }
  bool shdr(unsigned i, Elf64_Shdr* out) const {
    return i < eh.e_shnum && read(out, eh.e_shoff + uint64_t{i} * sizeof *out, sizeof *out);
  }
};

bool open_file(const ElfReader& r, File* f) {
  const Elf64_Ehdr& eh = f->eh;
  return r.read(r.ctx, &f->eh, 0, sizeof f->eh) && eh.e_ident[EI_MAG0] == ELFMAG0 &&
         eh.e_ident[EI_MAG1] == ELFMAG1 && eh.e_ident[EI_MAG2] == ELFMAG2 &&
         eh.e_ident[EI_MAG3] == ELFMAG3 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
         eh.e_ident[EI_DATA] == ELFDATA2LSB && eh.e_shentsize == sizeof(Elf64_Shdr);
}

// Whether section `sh`'s name is `want` exactly.
bool named(const File& f, const Elf64_Shdr& shstr, const Elf64_Shdr& sh, const char* want) {
  char buf[16];
  size_t n = 0;
  while (want[n]) ++n;
  if (n + 1 > sizeof buf || sh.sh_name >= shstr.sh_size || shstr.sh_size - sh.sh_name < n + 1 ||
      !f.read(buf, shstr.sh_offset + sh.sh_name, n + 1)) {
    return false;
  }
  for (size_t i = 0; i <= n; ++i)
    if (buf[i] != want[i]) return false;
  return true;
}

int32_t le32(const unsigned char* p) {
  return static_cast<int32_t>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
                              uint32_t{p[3]} << 24);
}

// The GOT slot an x86-64 stub at `entry` jumps through: `jmp *slot(%rip)`,
// first or after `endbr64` (.plt.sec, an IBT .plt.got), with or without the
// `bnd` prefix. The PLT header (`push`) and an IBT PLT's lazy stubs
// (`endbr64; push`) have none.
bool x86_64_slot(const unsigned char* code, uint64_t entry, uint64_t* slot) {
  size_t at = 0;
  if (code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa) at = 4;
  if (code[at] == 0xf2) ++at;  // bnd
  if (code[at] != 0xff || code[at + 1] != 0x25) return false;
  *slot = entry + at + 6 + static_cast<int64_t>(le32(code + at + 2));
  return true;
}

// The GOT slot an aarch64 stub at `entry` loads its target from:
// `adrp x16, page; ldr x17, [x16, #off]`, after a `bti c` or not.
bool aarch64_slot(const unsigned char* code, size_t n, uint64_t entry, uint64_t* slot) {
  for (size_t at = 0; at + 8 <= n && at <= 4; at += 4) {
    uint32_t adrp = static_cast<uint32_t>(le32(code + at));
    uint32_t ldr = static_cast<uint32_t>(le32(code + at + 4));
    if ((adrp & 0x9f00001fu) != 0x90000010u || (ldr & 0xffc003ffu) != 0xf9400211u) continue;
    int64_t pages = static_cast<int64_t>(((adrp >> 29) & 3) | ((adrp >> 3) & 0x1ffffc));
    if (pages & (int64_t{1} << 20)) pages -= int64_t{1} << 21;  // 21-bit signed
    uint64_t page = ((entry + at) & ~uint64_t{0xfff}) + static_cast<uint64_t>(pages * 4096);
    *slot = page + ((ldr >> 10) & 0xfff) * 8;
    return true;
  }
  return false;
}

// The relocation of `slot` in `rela` (a section of Elf64_Rela), scanning
// from the end when `backwards` (.rela.dyn); at most kMaxRelocs of them.
bool find_reloc(const File& f, const Elf64_Shdr& rela, uint64_t slot, bool backwards,
                Elf64_Rela* out) {
  if (rela.sh_entsize != sizeof(Elf64_Rela)) return false;
  uint64_t count = rela.sh_size / sizeof(Elf64_Rela);
  uint64_t look = count < kMaxRelocs ? count : kMaxRelocs;
  Elf64_Rela chunk[kRelocChunk];
  for (uint64_t done = 0; done < look;) {
    uint64_t take = look - done < kRelocChunk ? look - done : kRelocChunk;
    uint64_t first = backwards ? count - done - take : done;
    if (!f.read(chunk, rela.sh_offset + first * sizeof(Elf64_Rela), take * sizeof(Elf64_Rela)))
      return false;
    for (uint64_t k = 0; k < take; ++k) {
      if (chunk[k].r_offset == slot) {
        *out = chunk[k];
        return true;
      }
    }
    done += take;
  }
  return false;
}

// Appends s to name[*n..size); false when it does not fit.
bool append(char* name, size_t size, size_t* n, const char* s) {
  for (; *s; ++s) {
    if (*n + 1 >= size) return false;
    name[(*n)++] = *s;
  }
  name[*n] = '\0';
  return true;
}

bool append_hex(char* name, size_t size, size_t* n, uint64_t v) {
  char digits[19] = "0x";
  int len = 0;
  char rev[16];
  do {
    rev[len++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  for (int i = 0; i < len; ++i) digits[2 + i] = rev[len - 1 - i];
  digits[2 + len] = '\0';
  return append(name, size, n, digits);
}

// "NAME@plt", "NAME+0xADDEND@plt" or "*ABS*+0xADDEND@plt" for relocation
// `rel` of section `rela` (its symbols: the section sh_link names).
bool reloc_name(const File& f, const Elf64_Shdr& rela, const Elf64_Rela& rel, char* name,
                size_t size) {
  size_t n = 0;
  name[0] = '\0';
  uint64_t sym_index = ELF64_R_SYM(rel.r_info);
  if (sym_index == 0) {
    if (!append(name, size, &n, "*ABS*+") || !append_hex(name, size, &n, rel.r_addend))
      return false;
  } else {
    Elf64_Shdr symtab, strtab;
    Elf64_Sym sym;
    if (!f.shdr(rela.sh_link, &symtab) || symtab.sh_entsize != sizeof(Elf64_Sym) ||
        sym_index >= symtab.sh_size / sizeof(Elf64_Sym) || !f.shdr(symtab.sh_link, &strtab) ||
        !f.read(&sym, symtab.sh_offset + sym_index * sizeof sym, sizeof sym) ||
        sym.st_name >= strtab.sh_size) {
      return false;
    }
    // The name in pieces up to its terminator, all of it or nothing.
    uint64_t left = strtab.sh_size - sym.st_name;
    for (;;) {
      char piece[64];
      size_t take = left < sizeof piece ? left : sizeof piece;
      if (take == 0 || !f.read(piece, strtab.sh_offset + strtab.sh_size - left, take)) return false;
      size_t z = 0;
      while (z < take && piece[z]) {
        if (n + 1 >= size) return false;
        name[n++] = piece[z++];
      }
      name[n] = '\0';
      if (z < take) break;
      left -= take;
    }
    if (n == 0) return false;
    if (rel.r_addend != 0 &&
        (!append(name, size, &n, "+") || !append_hex(name, size, &n, rel.r_addend)))
      return false;
  }
  return append(name, size, &n, "@plt");
}

}  // namespace

bool pread_full(int fd, void* dst, uint64_t off, size_t n) {
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

bool read_fd(const void* ctx, void* dst, uint64_t off, size_t n) {
  return pread_full(*static_cast<const int*>(ctx), dst, off, n);
}

bool section_holds(const ElfReader& r, unsigned shndx, uint64_t addr) {
  File f{r, {}};
  Elf64_Shdr sh;
  if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE || !open_file(r, &f) || !f.shdr(shndx, &sh))
    return false;
  return addr >= sh.sh_addr && addr - sh.sh_addr < sh.sh_size;
}

bool plt_stub_name(const ElfReader& r, uint64_t addr, char* name, size_t size, uint64_t* start) {
  File f{r, {}};
  if (!open_file(r, &f)) return false;
  bool x86 = f.eh.e_machine == EM_X86_64;
  if (!x86 && f.eh.e_machine != EM_AARCH64) return false;
  Elf64_Shdr shstr;
  if (!f.shdr(f.eh.e_shstrndx, &shstr)) return false;
  // The code section holding addr, and the relocation sections.
  Elf64_Shdr code = {}, rela_plt = {}, rela_dyn = {};
  bool have_code = false, have_plt = false, have_dyn = false;
  unsigned shnum = f.eh.e_shnum < kMaxSections ? f.eh.e_shnum : kMaxSections;
  Elf64_Shdr chunk[16];
  for (unsigned i = 0; i < shnum; i += 16) {
    unsigned take = shnum - i < 16 ? shnum - i : 16;
    if (!f.read(chunk, f.eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), take * sizeof(Elf64_Shdr)))
      return false;
    for (unsigned k = 0; k < take; ++k) {
      const Elf64_Shdr& sh = chunk[k];
      if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) && addr >= sh.sh_addr &&
          addr - sh.sh_addr < sh.sh_size) {
        code = sh;
        have_code = true;
      } else if (sh.sh_type == SHT_RELA && !have_plt && named(f, shstr, sh, ".rela.plt")) {
        rela_plt = sh;
        have_plt = true;
      } else if (sh.sh_type == SHT_RELA && !have_dyn && named(f, shstr, sh, ".rela.dyn")) {
        rela_dyn = sh;
        have_dyn = true;
      }
    }
  }
  if (!have_code) return false;
  bool got_plt = x86 && named(f, shstr, code, ".plt.got");
  if (!got_plt && !named(f, shstr, code, ".plt") && !(x86 && named(f, shstr, code, ".plt.sec")))
    return false;
  // The stub holding addr. x86-64: 16-byte entries (8 in a .plt.got without
  // IBT: its sh_entsize), the header one of them. aarch64: a 32-byte header,
  // then one entry per .rela.plt relocation, in its order (16 bytes, 24 with
  // BTI or PAC).
  uint64_t entry = 0;
  uint64_t esz = 16;
  if (x86) {
    if (code.sh_entsize == 8 || code.sh_entsize == 16) esz = code.sh_entsize;
    entry = code.sh_addr + (addr - code.sh_addr) / esz * esz;
  } else {
    uint64_t n = have_plt ? rela_plt.sh_size / sizeof(Elf64_Rela) : 0;
    if (n == 0 || code.sh_size < 32 || (code.sh_size - 32) % n != 0) return false;
    esz = (code.sh_size - 32) / n;
    if ((esz != 16 && esz != 24) || addr - code.sh_addr < 32) return false;
    entry = code.sh_addr + 32 + (addr - code.sh_addr - 32) / esz * esz;
  }
  unsigned char bytes[24] = {};
  size_t avail = code.sh_addr + code.sh_size - entry;
  size_t take = avail < esz ? avail : esz;
  if (take < 8 || !f.read(bytes, code.sh_offset + (entry - code.sh_addr), take)) return false;
  uint64_t slot = 0;
  if (x86 ? !x86_64_slot(bytes, entry, &slot) : !aarch64_slot(bytes, take, entry, &slot))
    return false;
  // The relocation of that slot: .rela.plt's (a .plt.got slot's is in
  // .rela.dyn, among the last ones).
  Elf64_Rela rel;
  const Elf64_Shdr* in = nullptr;
  if (have_plt && !got_plt && find_reloc(f, rela_plt, slot, false, &rel)) {
    in = &rela_plt;
  } else if (have_dyn && got_plt && find_reloc(f, rela_dyn, slot, true, &rel)) {
    in = &rela_dyn;
  }
  if (!in || !reloc_name(f, *in, rel, name, size)) return false;
  *start = entry;
  return true;
}

}  // namespace faultline::core
