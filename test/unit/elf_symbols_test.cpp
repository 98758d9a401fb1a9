// The crash path's ELF symbol lookup, checked against nm (binutils) for
// system libraries: nm is the independent oracle.
#include "core/elf_symbols.h"

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <link.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/elf_lookup.h"

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
