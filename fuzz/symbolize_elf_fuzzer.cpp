// libFuzzer target: the ELF and DWARF path of the symbolizer. The input is
// an ELF file (the seed corpus is a small program with DWARF, see
// symbolize_fuzz.cmake); it is opened as a module and a spread of addresses
// is looked up. Any input must end in a usable module, or an unusable one
// with an error message; a crash or a sanitizer finding is a bug.
//
//   CXX=clang++-14 cmake -S . -B build-fuzz -DFAULTLINE_FUZZ=ON
//   cmake --build build-fuzz --target symbolize_elf_fuzzer
//   build-fuzz/fuzz-symbolize/symbolize_elf_fuzzer build-fuzz/fuzz-symbolize/corpus-elf \
//       -max_total_time=600 -rss_limit_mb=4096
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "memfd_input.h"
#include "symbolize/symbolize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_with(data, size);
  if (fd < 0) return 0;
  faultline::symbolize::SearchOptions options;
  options.system_debug_root = "/nonexistent";  // only the input itself
  options.use_debuginfod = false;
  auto module =
      faultline::symbolize::Module::open("/proc/self/fd/" + std::to_string(fd), "", options);
  if (module->usable()) {
    // Addresses spread over the low 1 MiB (where small programs' code is)
    // plus a few taken from the input itself.
    for (uint64_t a = 0; a < (1u << 20); a += 0x1000 - 7) module->lookup(a);
    for (size_t i = 0; i + 8 <= size && i < 64 * 8; i += 8) {
      uint64_t a;
      std::memcpy(&a, data + i, 8);
      module->lookup(a);
    }
  } else if (module->error().empty()) {
    __builtin_trap();  // an unusable module must say why
  }
  module.reset();
  close(fd);
  return 0;
}
