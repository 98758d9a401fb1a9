// The arena hands out zeroed memory: after a reset it clears what an earlier
// capture wrote, and it leaves memory never handed out (the kernel's zero
// pages) untouched.
#include "core/base/arena.h"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

using faultline::core::Arena;

namespace {

// Resident pages of [p, p + n), by mincore.
size_t resident_pages(const void* p, size_t n) {
  size_t page = static_cast<size_t>(getpagesize());
  unsigned char vec[1024];
  REQUIRE(n / page <= sizeof vec);
  REQUIRE(mincore(const_cast<void*>(p), n, vec) == 0);
  size_t count = 0;
  for (size_t i = 0; i < n / page; ++i) count += vec[i] & 1;
  return count;
}

}  // namespace

TEST_CASE("arena: memory is zero after a reset, and untouched until used") {
  Arena a{};
  REQUIRE(a.init(4u << 20));
  // A big array of which only the start is written, as a thread's frames.
  char* big = static_cast<char*>(a.alloc(1u << 20));
  REQUIRE(big);
  // Handing it out touched nothing past its head (populated ahead of use:
  // one system call instead of a page fault per page).
  CHECK(resident_pages(big, 1u << 20) <= faultline::core::kPopulateHead / 4096);
  CHECK(resident_pages(big + faultline::core::kPopulateHead,
                       (1u << 20) - faultline::core::kPopulateHead) == 0);
  // Where the kernel populates (Linux 5.14+), the head is resident already.
  void* probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(probe != MAP_FAILED);
  if (madvise(probe, 4096, MADV_POPULATE_WRITE) == 0)
    CHECK(resident_pages(big, faultline::core::kPopulateHead) ==
          faultline::core::kPopulateHead / 4096);
  munmap(probe, 4096);
  for (int i = 0; i < 100; ++i) big[i] = 'x';
  char* more = static_cast<char*>(a.alloc(1000));
  REQUIRE(more);
  for (int i = 0; i < 1000; ++i) more[i] = 'y';
  a.reset();
  // Used again: what was written is cleared, whatever the sizes now.
  char* again = static_cast<char*>(a.alloc(50));
  char* rest = static_cast<char*>(a.alloc((1u << 20) + 2000));
  REQUIRE(again);
  REQUIRE(rest);
  bool zero = true;
  for (int i = 0; i < 50; ++i) zero = zero && again[i] == 0;
  for (size_t i = 0; i < (1u << 20) + 2000; ++i) zero = zero && rest[i] == 0;
  CHECK(zero);
  a.release();
}
