// The mapping lookups behind a recovered fault's classification
// (src/core/signal/fault_access.cpp): the text of /proc/self/maps, read through a
// fixed buffer, and the kernel's PROCMAP_QUERY, against mappings made here.
#include "core/signal/fault_access.h"

#include <doctest/doctest.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

using faultline::core::maps_lookup_ioctl;
using faultline::core::maps_lookup_text;

namespace {

int open_maps() {
  return open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
}

int text(uint64_t addr, int* prot) {
  int fd = open_maps();
  REQUIRE(fd >= 0);
  int r = maps_lookup_text(fd, addr, prot);
  close(fd);
  return r;
}

// A maps-format file written here, for lines /proc would rarely show.
int text_of(const std::string& content, uint64_t addr, int* prot) {
  char path[] = "/tmp/faultline-maps-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  unlink(path);
  REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  lseek(fd, 0, SEEK_SET);
  int r = maps_lookup_text(fd, addr, prot);
  close(fd);
  return r;
}

}  // namespace

TEST_CASE("the text of /proc/self/maps gives each mapping's protection") {
  long page = sysconf(_SC_PAGESIZE);
  auto* p = static_cast<char*>(
      mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(p != MAP_FAILED);
  REQUIRE(mprotect(p + page, page, PROT_NONE) == 0);
  REQUIRE(mprotect(p + 2 * page, page, PROT_READ) == 0);
  auto at = [&](long off) { return reinterpret_cast<uint64_t>(p + off); };
  int prot = -1;
  CHECK(text(at(0), &prot) == 1);
  CHECK(prot == (PROT_READ | PROT_WRITE));
  CHECK(text(at(page + 10), &prot) == 1);
  CHECK(prot == PROT_NONE);
  CHECK(text(at(3 * page - 1), &prot) == 1);
  CHECK(prot == PROT_READ);
  CHECK(text(reinterpret_cast<uint64_t>(&open_maps), &prot) == 1);
  CHECK((prot & PROT_EXEC) != 0);
  munmap(p + page, page);
  CHECK(text(at(page), &prot) == 0);
  CHECK(text(0x10, &prot) == 0);
  CHECK(text(~uint64_t{0} - 4096, &prot) == 0);
  munmap(p, page);
  munmap(p + 2 * page, page);
}

TEST_CASE("the kernel's query agrees with the text where it has it") {
  int fd = open_maps();
  REQUIRE(fd >= 0);
  int prot = 0;
  int probe = maps_lookup_ioctl(fd, reinterpret_cast<uint64_t>(&prot), &prot);
  close(fd);
  if (probe < 0) {
    MESSAGE("no PROCMAP_QUERY in this kernel (before Linux 6.11): the text is used");
    return;
  }
  int stack_var = 0;
  const uint64_t addrs[] = {reinterpret_cast<uint64_t>(&stack_var),
                            reinterpret_cast<uint64_t>(&open_maps),
                            reinterpret_cast<uint64_t>(&errno), 0x10, 1ull << 46};
  for (uint64_t a : addrs) {
    int by_ioctl = -1, by_text = -1;
    fd = open_maps();
    int ri = maps_lookup_ioctl(fd, a, &by_ioctl);
    close(fd);
    int rt = text(a, &by_text);
    CHECK(ri == rt);
    if (ri == 1) CHECK(by_ioctl == by_text);
  }
}

TEST_CASE("a line longer than the read buffer and a last line without a newline") {
  std::string long_name(6000, 'x');
  std::string maps =
      "1000-2000 r--p 00000000 00:00 0 /a\n"
      "3000-4000 rw-p 00000000 00:00 0 /" +
      long_name + "\n" + "5000-6000 r-xp 00000000 00:00 0 /" + long_name + "\n" +
      "7000-8000 ---p 00000000 00:00 0";
  int prot = -1;
  CHECK(text_of(maps, 0x1800, &prot) == 1);
  CHECK(prot == PROT_READ);
  CHECK(text_of(maps, 0x3fff, &prot) == 1);
  CHECK(prot == (PROT_READ | PROT_WRITE));
  CHECK(text_of(maps, 0x5000, &prot) == 1);
  CHECK(prot == (PROT_READ | PROT_EXEC));
  CHECK(text_of(maps, 0x7123, &prot) == 1);
  CHECK(prot == PROT_NONE);
  CHECK(text_of(maps, 0x2000, &prot) == 0);
  CHECK(text_of(maps, 0x9000, &prot) == 0);
  CHECK(text_of("", 0x1000, &prot) == 0);
  CHECK(text_of("garbage\nmore garbage", 0x1000, &prot) == 0);
}
