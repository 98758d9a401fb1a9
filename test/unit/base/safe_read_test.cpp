#include "core/base/safe_read.h"

#include <doctest/doctest.h>
#include <sys/mman.h>

using namespace faultline::core;

static void check_reads() {
  int value = 1234, out = 0;
  CHECK(safe_read(&out, reinterpret_cast<uintptr_t>(&value), sizeof value));
  CHECK(out == 1234);
  CHECK_FALSE(safe_read(&out, 0, sizeof out));
  CHECK_FALSE(safe_read(&out, 16, sizeof out));
  // A page that exists but cannot be read, and the end of a mapping.
  char* p = static_cast<char*>(
      mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(p != MAP_FAILED);
  mprotect(p + 4096, 4096, PROT_NONE);
  p[4095] = 'x';
  char two[2];
  CHECK_FALSE(safe_read(two, reinterpret_cast<uintptr_t>(p + 4095), 2));
  CHECK(safe_read(two, reinterpret_cast<uintptr_t>(p + 4094), 2));
  CHECK(two[1] == 'x');
  // A string that runs into the unreadable page is cut where memory ends.
  for (int i = 0; i < 10; ++i) p[4086 + i] = 'a';
  char s[64];
  long n = safe_read_cstr(s, sizeof s, reinterpret_cast<uintptr_t>(p + 4086));
  CHECK(n == 10);
  munmap(p, 8192);
}

TEST_CASE("safe_read with process_vm_readv") {
  safe_read_init();
  safe_read_force(SafeReadMethod::kVmReadv);
  check_reads();
}

TEST_CASE("safe_read through the pipe fallback") {
  safe_read_init();
  safe_read_force(SafeReadMethod::kPipe);
  check_reads();
  // Reads larger than one pipe round trip.
  static char big[20000];
  for (size_t i = 0; i < sizeof big; ++i) big[i] = static_cast<char>(i * 7);
  static char copy[20000];
  CHECK(safe_read(copy, reinterpret_cast<uintptr_t>(big), sizeof big));
  CHECK(copy[19999] == big[19999]);
  safe_read_force(SafeReadMethod::kVmReadv);
}
