// libFuzzer target: the crash path's own ELF reading (src/core/elf_*), which
// a crash runs on the files of the modules it found: symbols by address
// (symbolize_module_frames) and by name (lookup_symbol_address, as the
// search for a CPython runtime does). The input is an ELF file (seeded with
// the symbolizer's seed program); any input must give names or none, never
// a crash, a hang or a sanitizer finding.
//
//   CXX=clang++-14 CC=clang-14 cmake -S . -B build-fuzz -DFAULTLINE_FUZZ=ON
//   cmake --build build-fuzz --target crash_elf_fuzzer symbolize_fuzz_seed
//   build-fuzz/fuzz/crash_elf_fuzzer build-fuzz/fuzz/corpus-crash-elf \
//       build-fuzz/fuzz-symbolize/seed-elf -max_total_time=600
#include <stdio.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/base/arena.h"
#include "core/modules/elf_lookup.h"
#include "core/modules/elf_symbols.h"
#include "memfd_input.h"

using namespace faultline::core;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_with(data, size);
  if (fd < 0) return 0;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  Module m{};
  m.path = path;
  m.base = 0;
  m.end = 1u << 24;
  m.bias = 0;  // file addresses are runtime addresses

  // By name: what the runtime search asks, an empty name, one longer than
  // any compare, and names cut from the input itself.
  static const std::string kLong(5000, 'n');
  for (const char* name : {"_PyRuntime", "Py_Version", "main", "", kLong.c_str()}) {
    lookup_symbol_address(m, name);
  }
  char name[64];
  for (size_t i = 0; i + sizeof name <= size && i < 8 * sizeof name; i += sizeof name) {
    memcpy(name, data + i, sizeof name - 1);
    name[sizeof name - 1] = '\0';
    lookup_symbol_address(m, name);
  }

  // By address: a spread over the low 1 MiB and values taken from the input.
  static Arena arena;
  static bool ready = arena.init(4u << 20);
  if (!ready) {
    close(fd);
    return 0;
  }
  arena.reset();
  NativeFrame frames[96] = {};
  NativeFrame* ptrs[96];
  int n = 0;
  for (uint64_t a = 0; a < (1u << 20) && n < 48; a += (1u << 20) / 48) frames[n++].pc = a + 0x10;
  for (size_t i = 0; i + 8 <= size && n < 96; i += 8) memcpy(&frames[n++].pc, data + i, 8);
  for (int i = 0; i < n; ++i) {
    frames[i].module = 0;
    frames[i].signal_frame = i % 2;
    ptrs[i] = &frames[i];
  }
  CaptureErrors errors{};
  symbolize_module_frames(m, ptrs, n, &arena, &errors);
  for (int i = 0; i < n; ++i) {
    if (frames[i].symbol) (void)strlen(frames[i].symbol);  // a terminated name
  }
  close(fd);
  return 0;
}
