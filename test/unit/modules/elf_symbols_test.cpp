// The crash path's ELF symbol lookup, checked against nm (binutils) for
// system libraries: nm is the independent oracle.
#include "core/modules/elf_symbols.h"

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <link.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/arena.h"
#include "core/modules/elf_lookup.h"
#include "core/modules/elf_source.h"

using namespace faultline::core;

namespace {

struct NmSymbol {
  uint64_t value, size;
};

// value -> names (aliases share an address), from `nm -S [-D] --defined-only`.
std::map<uint64_t, std::set<std::string>> nm_functions(const std::string& path, bool dynamic,
                                                       std::vector<NmSymbol>* sized) {
  std::string cmd =
      "nm -S --defined-only " + std::string(dynamic ? "-D " : "") + path + " 2>/dev/null";
  std::map<uint64_t, std::set<std::string>> out;
  FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    std::istringstream in(line);
    std::string v, s, type, name;
    if (!(in >> v >> s >> type >> name)) continue;
    if (type != "T" && type != "t" && type != "W" && type != "i") continue;
    uint64_t value = std::stoull(v, nullptr, 16), size = std::stoull(s, nullptr, 16);
    if (value == 0 || size == 0) continue;
    auto at = name.find('@');
    if (at != std::string::npos) name = name.substr(0, at);
    out[value].insert(name);
    sized->push_back({value, size});
  }
  pclose(f);
  return out;
}

// repeats > 1: each address several times, exact and as a return address,
// interleaved (as many threads in the same functions give them); a small
// arena_bytes forces the static 64-address batches.
void check_library(const char* path, bool dynamic, int repeats = 1, size_t arena_bytes = 4u << 20) {
  std::vector<NmSymbol> sized;
  auto names = nm_functions(path, dynamic, &sized);
  REQUIRE(sized.size() > 50);
  Arena arena;
  arena = Arena{};
  REQUIRE(arena.init(arena_bytes));
  Module m{};
  m.path = path;
  m.base = 0;
  m.end = UINT64_MAX;
  m.bias = 0;
  // Every 7th function, looked up in its middle, in batches like the handler.
  std::vector<NativeFrame> frames;
  std::vector<uint64_t> starts;
  for (int r = 0; r < repeats; ++r) {
    for (size_t i = 0; i < sized.size(); i += 7) {
      NativeFrame f{};
      f.signal_frame = r % 2 == 0;
      // A return address is looked up one byte before it.
      f.pc = sized[i].value + sized[i].size / 2 + (f.signal_frame ? 0 : 1);
      if (!f.signal_frame && sized[i].size < 4) continue;
      frames.push_back(f);
      starts.push_back(sized[i].value);
    }
  }
  std::vector<NativeFrame*> ptrs;
  for (auto& f : frames) ptrs.push_back(&f);
  CaptureErrors errors{};
  REQUIRE(symbolize_module_frames(m, ptrs.data(), static_cast<int>(ptrs.size()), &arena, &errors));
  int agree = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const NativeFrame& f = frames[i];
    // Nested sized symbols are possible; accept any name nm gives for the
    // start our lookup chose, as long as our offset puts it at that start.
    uint64_t chosen = f.pc - f.symbol_offset;
    bool ok = f.symbol && names.count(chosen) && names[chosen].count(f.symbol) && chosen <= f.pc &&
              (chosen == starts[i] || names[starts[i]].count(f.symbol));
    if (ok) ++agree;
  }
  INFO(path << ": " << agree << " of " << frames.size() << " agree with nm");
  CHECK(agree >= static_cast<int>(frames.size() * 99 / 100));
  arena.release();
}

}  // namespace

TEST_CASE("libc .dynsym lookup agrees with nm -D") {
  check_library("/lib/x86_64-linux-gnu/libc.so.6", true);
}

TEST_CASE("repeated addresses are named alike, also in batches when the arena is short") {
  // 3 x every 7th libc function, exact and return-address frames mixed.
  check_library("/lib/x86_64-linux-gnu/libc.so.6", true, 3);
  // An arena with room for the names but not for the ~800 distinct
  // addresses' arrays (48 bytes each).
  check_library("/lib/x86_64-linux-gnu/libc.so.6", true, 3, 24u << 10);
}

TEST_CASE("libstdc++ .dynsym lookup agrees with nm -D (mangled names)") {
  check_library("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", true);
}

TEST_CASE("static .symtab lookup agrees with nm (local functions)") {
  // The unit test binary itself has a full .symtab with local functions.
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(n > 0);
  self[n] = '\0';
  // PIE: symbols are link-time addresses, so bias 0 works on the file.
  check_library(self, false);
}

namespace {

int find_loaded_libc(struct dl_phdr_info* info, size_t, void* data) {
  if (!std::strstr(info->dlpi_name, "libc.so.6")) return 0;
  Module* m = static_cast<Module*>(data);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    lo = ph.p_vaddr < lo ? ph.p_vaddr : lo;
    hi = ph.p_vaddr + ph.p_memsz > hi ? ph.p_vaddr + ph.p_memsz : hi;
  }
  m->bias = info->dlpi_addr;
  m->base = info->dlpi_addr + (lo & ~uintptr_t{4095});
  m->end = info->dlpi_addr + hi;
  return 1;
}

}  // namespace

TEST_CASE("a library whose file is gone is named from the loaded image's exported symbols") {
  // The libc this test runs with, as if its file had been deleted since it
  // was loaded: its .dynsym, .dynstr and GNU hash table are read from memory.
  Module m{};
  REQUIRE(dl_iterate_phdr(find_loaded_libc, &m) == 1);
  m.path = "/nonexistent/libc.so.6";
  // A build-id no file has: neither /proc/self/map_files (open to root) nor
  // a debug file stands in for the image.
  m.build_id_len = 20;
  for (int i = 0; i < m.build_id_len; ++i) m.build_id[i] = 0xa5;
  std::vector<NmSymbol> sized;
  auto names = nm_functions("/lib/x86_64-linux-gnu/libc.so.6", true, &sized);
  REQUIRE(sized.size() > 50);
  Arena arena;
  REQUIRE(arena.init(4u << 20));
  std::vector<NativeFrame> frames;
  for (size_t i = 0; i < sized.size(); i += 7) {
    NativeFrame f{};
    f.signal_frame = true;
    f.pc = m.bias + sized[i].value + sized[i].size / 2;
    frames.push_back(f);
  }
  std::vector<NativeFrame*> ptrs;
  for (auto& f : frames) ptrs.push_back(&f);
  CaptureErrors errors{};
  REQUIRE(symbolize_module_frames(m, ptrs.data(), static_cast<int>(ptrs.size()), &arena, &errors));
  int agree = 0;
  for (const NativeFrame& f : frames) {
    uint64_t chosen = f.pc - m.bias - f.symbol_offset;
    if (f.symbol && names.count(chosen) && names[chosen].count(f.symbol)) ++agree;
  }
  INFO(agree << " of " << frames.size() << " agree with nm -D");
  CHECK(agree >= static_cast<int>(frames.size() * 99 / 100));
  REQUIRE(errors.count == 1);
  CHECK(std::string(errors.items[0]).find("loaded image's exported symbols") != std::string::npos);
  // Lookups by name go through the image's GNU hash table.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(libc != nullptr);
  for (const char* name : {"getpid", "timer_delete", "fork"}) {
    CHECK_MESSAGE(lookup_symbol_address(m, name) == reinterpret_cast<uintptr_t>(dlsym(libc, name)),
                  name);
  }
  CHECK(lookup_symbol_address(m, "no_such_symbol_anywhere") == 0);
  dlclose(libc);
  arena.release();
}

namespace {

// A shared object's image as the loader leaves it, built in memory: an ELF
// header, PT_DYNAMIC, .dynsym (alpha, beta, gamma), .dynstr and a hash table.
struct FakeImage {
  alignas(4096) unsigned char bytes[0x6000] = {};
  uintptr_t base() const { return reinterpret_cast<uintptr_t>(bytes); }
  template <typename T>
  T* at(size_t off) {
    return reinterpret_cast<T*>(bytes + off);
  }
  // relocated: the dynamic section holds runtime addresses (glibc rewrites
  // it in place), else link-time ones. gnu: a GNU hash table (whose chain
  // never ends when corrupt) instead of DT_HASH with nchain.
  FakeImage(bool relocated, bool gnu, uint32_t nchain = 4, bool corrupt = false) {
    auto* eh = at<ElfW(Ehdr)>(0);
    std::memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_phoff = sizeof(ElfW(Ehdr));
    eh->e_phentsize = sizeof(ElfW(Phdr));
    eh->e_phnum = 1;
    auto* ph = at<ElfW(Phdr)>(sizeof(ElfW(Ehdr)));
    ph->p_type = PT_DYNAMIC;
    ph->p_vaddr = 0x1000;
    ph->p_memsz = 8 * sizeof(ElfW(Dyn));
    uintptr_t add = relocated ? base() : 0;
    auto* dyn = at<ElfW(Dyn)>(0x1000);
    dyn[0] = {DT_SYMTAB, {0x2000 + add}};
    dyn[1] = {DT_STRTAB, {0x3000 + add}};
    dyn[2] = {DT_STRSZ, {0x20}};
    dyn[3] = {gnu ? DT_GNU_HASH : DT_HASH, {0x4000 + add}};
    dyn[4] = {DT_NULL, {0}};
    std::memcpy(at<char>(0x3000), "\0alpha\0beta\0gamma\0", 18);
    auto* sym = at<ElfW(Sym)>(0x2000);
    const uint32_t names[] = {0, 1, 7, 12};
    for (int i = 1; i < 4; ++i) {
      sym[i].st_name = names[i];
      sym[i].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
      sym[i].st_shndx = 1;
      sym[i].st_value = 0x5000 + 0x10 * static_cast<uint64_t>(i - 1);
      sym[i].st_size = 0x10;
    }
    auto* h = at<uint32_t>(0x4000);
    if (!gnu) {
      h[0] = 1;  // nbucket
      h[1] = nchain;
      return;
    }
    // nbuckets 1, symoffset 1, 1 bloom word, shift; then the bucket (its
    // chain starts at symbol 1) and the chain of symbols 1..3.
    h[0] = 1;
    h[1] = 1;
    h[2] = 1;
    h[3] = 6;
    uint32_t* bucket = at<uint32_t>(0x4000 + 16 + 8);
    bucket[0] = 1;
    uint32_t* chain = bucket + 1;
    const char* const chain_names[] = {"alpha", "beta", "gamma"};
    for (int i = 0; i < 3; ++i) {  // each symbol's hash, low bit clear
      uint32_t hash = 5381;
      for (const char* c = chain_names[i]; *c; ++c)
        hash = hash * 33 + static_cast<unsigned char>(*c);
      chain[i] = hash & ~1u;
    }
    if (!corrupt) chain[2] |= 1;  // the chain's end
    for (int i = 3; corrupt && i < 0x200; ++i) chain[i] = 2;
  }
};

}  // namespace

TEST_CASE("the exported symbols of an image: relocated or not, DT_HASH or GNU hash, corrupt") {
  for (bool relocated : {false, true}) {
    for (bool gnu : {false, true}) {
      auto img = std::make_unique<FakeImage>(relocated, gnu);
      uintptr_t base = img->base(), end = base + sizeof img->bytes;
      ElfSource src;
      SymTab tab{};
      INFO("relocated " << relocated << ", gnu " << gnu);
      REQUIRE(find_image_dynsym(base, end, base, &src, &tab));
      CHECK(tab.sym_size == 4 * sizeof(ElfW(Sym)));
      CHECK(tab.sym_off == 0x2000);
      CHECK(tab.str_off == 0x3000);
      // Named through symbolize_module_frames, as a crash would.
      Module m{};
      m.path = "/nonexistent/libfake.so";
      m.base = base;
      m.end = end;
      m.bias = base;
      m.build_id_len = 20;
      for (int i = 0; i < 20; ++i) m.build_id[i] = 0xa5;
      Arena arena;
      REQUIRE(arena.init(1u << 20));
      NativeFrame f{};
      f.signal_frame = true;
      f.pc = base + 0x5014;
      NativeFrame* ptr = &f;
      CaptureErrors errors{};
      REQUIRE(symbolize_module_frames(m, &ptr, 1, &arena, &errors));
      REQUIRE(f.symbol != nullptr);
      CHECK(std::string(f.symbol) == "beta");
      CHECK(f.symbol_offset == 4);
      if (gnu) CHECK(lookup_symbol_address(m, "gamma") == base + 0x5020);
      arena.release();
    }
  }
  // A count from a corrupt table is held to the room before .dynstr (0x1000
  // bytes: 170 symbols), not the whole image: nchain 2^32-1, and a GNU chain
  // that never ends.
  for (bool gnu : {false, true}) {
    auto img = std::make_unique<FakeImage>(false, gnu, 0xffffffffu, true);
    uintptr_t base = img->base();
    ElfSource src;
    SymTab tab{};
    bool found = find_image_dynsym(base, base + sizeof img->bytes, base, &src, &tab);
    INFO("gnu " << gnu);
    CHECK(tab.sym_size <= 0x1000);
    if (!gnu) CHECK(found);
  }
  // No image at all, or bias 0: nothing, and no fault.
  ElfSource src;
  SymTab tab{};
  CHECK_FALSE(find_image_dynsym(4096, 8192, 4096, &src, &tab));
  auto img = std::make_unique<FakeImage>(false, false);
  CHECK_FALSE(find_image_dynsym(img->base(), img->base() + 0x6000, 0, &src, &tab));
}

TEST_CASE("lookup_symbol_address finds exported data by name") {
  Module m{};
  m.path = "/lib/x86_64-linux-gnu/libc.so.6";
  std::vector<NmSymbol> sized;
  // Every default-version function nm -D lists (name@@VERSION or
  // unversioned) is found at its address, through .gnu.hash.
  FILE* f = popen("nm -D --defined-only /lib/x86_64-linux-gnu/libc.so.6", "r");
  REQUIRE(f != nullptr);
  char line[4096];
  int checked = 0;
  while (fgets(line, sizeof line, f)) {
    std::istringstream in(line);
    std::string v, type, name;
    if (!(in >> v >> type >> name) || (type != "T" && type != "W" && type != "i")) continue;
    auto at = name.find('@');
    if (at != std::string::npos) {
      if (name.compare(at, 2, "@@") != 0) continue;  // a non-default version
      name = name.substr(0, at);
    }
    if (checked++ % 7) continue;
    CHECK_MESSAGE(lookup_symbol_address(m, name.c_str()) == std::stoull(v, nullptr, 16), name);
  }
  pclose(f);
  CHECK(checked > 1000);
  // timer_delete has two versions; the default one is taken.
  CHECK(lookup_symbol_address(m, "timer_delete") != 0);
  CHECK(lookup_symbol_address(m, "no_such_symbol_anywhere") == 0);
}

namespace {

// The build-id of `path` (readelf -n), as bytes.
std::vector<uint8_t> build_id_of(const std::string& path) {
  std::string cmd = "readelf -n " + path + " 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  char line[4096];
  std::vector<uint8_t> id;
  while (fgets(line, sizeof line, f)) {
    std::string s(line);
    auto at = s.find("Build ID: ");
    if (at == std::string::npos) continue;
    std::string hex = s.substr(at + 10);
    for (size_t i = 0; i + 1 < hex.size() && isxdigit(hex[i]) && isxdigit(hex[i + 1]); i += 2)
      id.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  pclose(f);
  return id;
}

}  // namespace

TEST_CASE("a stripped library's local functions come from its debug file, by build-id") {
  const char* libc = "/lib/x86_64-linux-gnu/libc.so.6";
  std::vector<uint8_t> id = build_id_of(libc);
  REQUIRE(id.size() >= 2);
  char debug[256];
  std::snprintf(debug, sizeof debug, "/usr/lib/debug/.build-id/%02x/", id[0]);
  std::string debug_path = debug;
  for (size_t i = 1; i < id.size(); ++i) {
    std::snprintf(debug, sizeof debug, "%02x", id[i]);
    debug_path += debug;
  }
  debug_path += ".debug";
  if (access(debug_path.c_str(), R_OK) != 0) {
    MESSAGE("no libc debug file (libc6-dbg): skipped");
    return;
  }
  std::vector<NmSymbol> sized;
  auto names = nm_functions(debug_path, false, &sized);
  // Local functions (not in .dynsym) and one address with three names.
  uint64_t start_thread = 0, raise = 0;
  for (const auto& [value, set] : names) {
    if (set.count("start_thread")) start_thread = value;
    if (set.count("raise") && set.count("gsignal")) raise = value;
  }
  REQUIRE(start_thread != 0);
  REQUIRE(raise != 0);
  Arena arena;
  REQUIRE(arena.init(1u << 20));
  Module m{};
  m.path = libc;
  m.end = UINT64_MAX;
  m.build_id_len = static_cast<uint8_t>(id.size());
  for (size_t i = 0; i < id.size() && i < sizeof m.build_id; ++i) m.build_id[i] = id[i];
  NativeFrame frames[2] = {};
  frames[0].pc = start_thread + 2;
  frames[1].pc = raise + 2;
  NativeFrame* ptrs[2] = {&frames[0], &frames[1]};
  CaptureErrors errors{};
  REQUIRE(symbolize_module_frames(m, ptrs, 2, &arena, &errors));
  REQUIRE(frames[0].symbol != nullptr);
  CHECK(std::string(frames[0].symbol) == "start_thread");
  REQUIRE(frames[1].symbol != nullptr);
  // The global name, as a debugger shows it from the symbol tables: not the
  // weak gsignal nor glibc's local __GI_raise.
  CHECK(std::string(frames[1].symbol) == "raise");
  arena.release();
}

TEST_CASE("lookup_symbol_address finds symbols only the full symbol table has") {
  // This test program's own .symtab: names it does not export (static
  // functions and variables, hidden ones) are found by the scan that reads
  // the string table through a window; nm is the oracle. Names defined more
  // than once (local statics of several files) are left out.
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(n > 0);
  self[n] = '\0';
  Module m{};
  m.path = self;
  std::map<std::string, std::set<uint64_t>> defined;
  FILE* f = popen(("nm --defined-only " + std::string(self) + " 2>/dev/null").c_str(), "r");
  REQUIRE(f != nullptr);
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    std::istringstream in(line);
    std::string v, type, name;
    if (!(in >> v >> type >> name)) continue;
    if (type == "a" || type == "A" || type == "N" || type == "U") continue;  // absolute, debug
    defined[name].insert(std::stoull(v, nullptr, 16));
  }
  pclose(f);
  REQUIRE(defined.size() > 1000);
  int checked = 0, unexported = 0, cut = 0;
  for (const auto& [name, values] : defined) {
    if (values.size() != 1 || name.size() >= 128) continue;
    ++checked;
    uintptr_t got = lookup_symbol_address(m, name.c_str());
    CHECK_MESSAGE(got == *values.begin(), name);
    if (!dlsym(RTLD_DEFAULT, name.c_str())) ++unexported;
    // A name cut short, or run on, is not that name.
    std::string shorter = name.substr(0, name.size() - 1), longer = name + "_x";
    if (name.size() > 1 && !defined.count(shorter)) {
      CHECK_MESSAGE(lookup_symbol_address(m, shorter.c_str()) == 0, shorter);
      ++cut;
    }
    if (!defined.count(longer))
      CHECK_MESSAGE(lookup_symbol_address(m, longer.c_str()) == 0, longer);
  }
  CHECK(checked > 1000);
  CHECK(unexported > 50);  // the scan, not the hash table, found these
  CHECK(cut > 50);
  CHECK(lookup_symbol_address(m, "no_such_symbol_anywhere") == 0);
}

namespace {

// A file of one ELF header and three sections (null, .symtab, .strtab) for
// the scan by name, with a string table the test lays out as it likes;
// str_size may claim more than the file holds.
struct HandMadeElf {
  std::string strtab = std::string(1, '\0');
  std::vector<ElfW(Sym)> syms = {ElfW(Sym){}};
  uint64_t str_size_override = ~0ull;

  // A defined symbol named at offset `name` of the table, valued `value`.
  void add(uint32_t name, uint64_t value) {
    ElfW(Sym) s{};
    s.st_name = name;
    s.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
    s.st_shndx = 1;
    s.st_value = value;
    syms.push_back(s);
  }
  uint32_t add_name(const std::string& n) {
    uint32_t at = static_cast<uint32_t>(strtab.size());
    strtab += n;
    strtab.push_back('\0');
    return at;
  }
  std::string write(const std::string& path) const {
    ElfW(Ehdr) eh{};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof eh;
    eh.e_shentsize = sizeof(ElfW(Shdr));
    eh.e_shnum = 3;
    uint64_t sym_off = sizeof eh, str_off = sym_off + syms.size() * sizeof(ElfW(Sym));
    eh.e_shoff = str_off + strtab.size();
    ElfW(Shdr) sh[3] = {};
    sh[1].sh_type = SHT_SYMTAB;
    sh[1].sh_offset = sym_off;
    sh[1].sh_size = syms.size() * sizeof(ElfW(Sym));
    sh[1].sh_entsize = sizeof(ElfW(Sym));
    sh[1].sh_link = 2;
    sh[2].sh_type = SHT_STRTAB;
    sh[2].sh_offset = str_off;
    sh[2].sh_size = str_size_override != ~0ull ? str_size_override : strtab.size();
    std::string out(reinterpret_cast<const char*>(&eh), sizeof eh);
    out.append(reinterpret_cast<const char*>(syms.data()), syms.size() * sizeof(ElfW(Sym)));
    out += strtab;
    out.append(reinterpret_cast<const char*>(sh), sizeof sh);
    FILE* f = fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(fwrite(out.data(), 1, out.size(), f) == out.size());
    fclose(f);
    return path;
  }
};

uintptr_t lookup_in(const HandMadeElf& elf, const char* name) {
  static int n = 0;
  std::string path = "/tmp/fl-handmade-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  elf.write(path);
  Module m{};
  m.path = path.c_str();
  uintptr_t r = lookup_symbol_address(m, name);
  unlink(path.c_str());
  return r;
}

}  // namespace

TEST_CASE("the scan by name keeps to the string table, however it is laid out") {
  HandMadeElf elf;
  // Names across several 4 KiB windows, some straddling a window's end.
  std::vector<std::pair<std::string, uint64_t>> names;
  for (int i = 0; i < 600; ++i) {
    std::string n = "name_" + std::to_string(i) + std::string(static_cast<size_t>(i % 23), 'x');
    elf.add(elf.add_name(n), 0x1000 + static_cast<uint64_t>(i));
    names.emplace_back(n, 0x1000 + static_cast<uint64_t>(i));
  }
  const std::string longest(4095, 'L'), too_long(4096, 'T');
  elf.add(elf.add_name(longest), 0x9000);
  elf.add(elf.add_name(too_long), 0x9001);
  elf.add(0xfffffff0u, 0x9002);  // a name far past the table
  for (const auto& [n, v] : names) CHECK_MESSAGE(lookup_in(elf, n.c_str()) == v, n);
  CHECK(lookup_in(elf, longest.c_str()) == 0x9000);
  CHECK(lookup_in(elf, too_long.c_str()) == 0);  // longer than the scan compares
  CHECK(lookup_in(elf, "") == 0);                // not the first nameless symbol
  CHECK(lookup_in(elf, "name_5x") == 0);         // "name_5xxxxx" cut short
  CHECK(lookup_in(elf, "name_599xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") == 0);

  // A last name without its terminator inside the table is not found, and
  // nothing is read from past the table's end.
  HandMadeElf cut;
  cut.add(cut.add_name("first"), 0x10);
  uint32_t at = static_cast<uint32_t>(cut.strtab.size());
  cut.strtab += "last";  // no '\0': the table ends here
  cut.add(at, 0x20);
  cut.syms.back().st_name = at;
  CHECK(lookup_in(cut, "first") == 0x10);
  CHECK(lookup_in(cut, "last") == 0);

  // A table that claims more than the file holds: the window's read fails
  // at the end of the file and the name alone is read.
  HandMadeElf claims = elf;
  claims.str_size_override = 64u << 20;
  CHECK(lookup_in(claims, "name_0") == 0x1000);
  CHECK(lookup_in(claims, names.back().first.c_str()) == names.back().second);
  HandMadeElf small = cut;  // a file shorter than one window
  small.str_size_override = 64u << 20;
  CHECK(lookup_in(small, "first") == 0x10);
  // An empty table finds nothing.
  HandMadeElf empty = elf;
  empty.str_size_override = 0;
  CHECK(lookup_in(empty, "name_0") == 0);
}
