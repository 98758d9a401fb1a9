#include "core/base/arena.h"

#include <errno.h>
#include <sys/mman.h>

#include "core/base/str.h"
#include "core/base/sys.h"

// Linux 5.14; older C library headers lack it.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace faultline::core {

namespace {
// Set when the kernel has no MADV_POPULATE_WRITE (before 5.14): no more
// system calls in vain.
int g_populate_unsupported = 0;
}  // namespace

bool Arena::init(size_t bytes) {
  if (base_ && size_ >= bytes) return true;
  release();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  // Not in core files: touched it is a copy of what the report holds, and
  // a piped core handler is sent zeros for untouched pages (16 MB more per
  // core). At init: a signal faultline does not handle (SIGQUIT, SIGSYS)
  // dumps core without a capture first.
  madvise(p, bytes, MADV_DONTDUMP);
  name_mapping(p, bytes, "faultline arena");
  base_ = static_cast<char*>(p);
  size_ = bytes;
  used_ = 0;
  clean_ = 0;
  populated_ = 0;
  advised_ = false;
  return true;
}

void Arena::advise() {
  // No transparent huge pages: populating a 4 KiB head would make 2 MiB
  // resident where THP is "always". Before the first page is touched, not
  // at init: a system call every process would pay at start.
  advised_ = true;
  madvise(base_, size_, MADV_NOHUGEPAGE);
}

bool populate_pages(void* from, void* to) {
  if (__atomic_load_n(&g_populate_unsupported, __ATOMIC_RELAXED)) return false;
  constexpr uintptr_t kPage = 4096;
  uintptr_t lo = reinterpret_cast<uintptr_t>(from) & ~(kPage - 1);
  uintptr_t hi = (reinterpret_cast<uintptr_t>(to) + kPage - 1) & ~(kPage - 1);
  // Without it the pages are faulted in one by one on first touch, as before.
  return hi <= lo || madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE) == 0 ||
         errno != EINVAL;
}

void Arena::populate(char* from, char* to) {
  // The arena is our own writable memory: EINVAL here can only mean a
  // kernel without MADV_POPULATE_WRITE (before 5.14). Asked at the first
  // capture, not at start-up, which every process pays.
  if (!populate_pages(from, to)) __atomic_store_n(&g_populate_unsupported, 1, __ATOMIC_RELAXED);
}

void Arena::release() {
  if (base_) munmap(base_, size_);
  base_ = nullptr;
  size_ = used_ = clean_ = populated_ = 0;
  advised_ = false;
}

void* Arena::alloc_uninit(size_t n, size_t align) {
  size_t start = (used_ + align - 1) & ~(align - 1);
  if (!base_ || start + n > size_ || start + n < start) {
    exhausted_ = true;
    return nullptr;
  }
  if (!advised_) advise();
  used_ = start + n;
  if (used_ > clean_) clean_ = used_;
  return base_ + start;
}

void* Arena::alloc(size_t n, size_t align) {
  size_t clean = clean_;
  char* p = static_cast<char*>(alloc_uninit(n, align));
  if (!p) return nullptr;
  size_t start = static_cast<size_t>(p - base_);
  if (n > kPopulateSmall) {
    // Only its head (see populated_); populated_ does not move past it.
    if (start + kPopulateHead > populated_) populate(p, p + kPopulateHead);
  } else if (used_ > populated_) {  // see populated_
    size_t from = start > populated_ ? start : populated_;
    size_t to = used_ + kPopulateAhead < size_ ? used_ + kPopulateAhead : size_;
    populate(base_ + from, base_ + to);
    populated_ = to;
  }
  // The arena may hold a previous dump's data: zero what we hand out, up to
  // where it was never used.
  size_t dirty = start < clean ? (clean - start < n ? clean - start : n) : 0;
  for (size_t i = 0; i < dirty; ++i) p[i] = 0;
  return p;
}

const char* Arena::dup(const char* s, size_t max) {
  size_t n = str_nlen(s, max);
  char* p = static_cast<char*>(alloc(n + 1, 1));
  if (!p) return nullptr;
  for (size_t i = 0; i < n; ++i) p[i] = s[i];
  p[n] = '\0';
  return p;
}

}  // namespace faultline::core
