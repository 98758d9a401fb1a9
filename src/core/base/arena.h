// Arena: the crash path's only memory. One anonymous mapping made at install;
// at crash time it is handed out by bumping a pointer and never freed. Sized
// so that a report of many threads fits (see kDefaultArenaBytes).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace faultline::core {

// 16 MiB: room for 256 threads x 256 native frames with symbol names, the
// module table, the Python frames and the output buffer, with slack. It is
// reserved address space; untouched pages cost no memory.
constexpr size_t kDefaultArenaBytes = 16u << 20;

// Faults in the pages of [from, to) (page-aligned outwards) with one system
// call. Async-signal-safe; a no-op where the kernel lacks MADV_POPULATE_WRITE
// (before 5.14): the pages are then faulted in one by one as before. False
// when the kernel said EINVAL (no such advice, or a range it will not
// populate: only the arena, our own writable memory, can tell which).
bool populate_pages(void* from, void* to);

// Allocations up to kPopulateSmall bytes are populated kPopulateAhead at a
// time; of a bigger one only its first kPopulateHead bytes.
constexpr size_t kPopulateSmall = 4u << 10;
constexpr size_t kPopulateAhead = 32u << 10;
constexpr size_t kPopulateHead = 4u << 10;

class Arena {
 public:
  // constexpr, so a global Arena (and CrashState) is constant-initialised:
  // no dynamic constructor can run after the preload constructor and wipe it.
  constexpr Arena()
      : base_(nullptr),
        size_(0),
        used_(0),
        clean_(0),
        populated_(0),
        exhausted_(false),
        advised_(false) {}
  // Install time (mmap). Returns false on failure.
  bool init(size_t bytes);
  void release();
  // Async-signal-safe. Returns zeroed memory or nullptr when exhausted.
  void* alloc(size_t n, size_t align = 16);
  // The same without zeroing (nor touching) it: for a big buffer the caller
  // fills before reading, whose untouched pages then cost nothing.
  void* alloc_uninit(size_t n, size_t align = 16);
  template <typename T>
  T* alloc_array(size_t count) {
    return static_cast<T*>(alloc(sizeof(T) * count, alignof(T)));
  }
  // Copies a string into the arena (truncated to max bytes, terminated).
  const char* dup(const char* s, size_t max);
  void reset() {
    used_ = 0;
    populated_ = 0;
  }
  size_t used() const { return used_; }
  size_t capacity() const { return size_; }
  bool exhausted() const { return exhausted_; }

 private:
  void populate(char* from, char* to);
  char* base_;
  size_t size_;
  size_t used_;
  // Everything from here on was never handed out since the mapping was
  // made: still the kernel's zero pages, so alloc need not clear (nor touch)
  // it. A report of 256 threads asks for 256 x max_frames frames and fills
  // a fifth of them.
  size_t clean_;
  // alloc() has asked the kernel for the pages up to here in this capture.
  // A first touch of a page costs a page fault each (~10 us in a virtual
  // machine); MADV_POPULATE_WRITE gives a run of them in one system call
  // (~0.6 us a page). So alloc() populates small allocations ahead,
  // kPopulateAhead at a time, and of a bigger one only its head: big arrays
  // (a thread's frames, the module table) are sized for the worst case and
  // mostly left untouched, and what is populated stays resident in a
  // process that goes on after a live dump. alloc_uninit() populates
  // nothing.
  size_t populated_;
  bool exhausted_;
  // MADV_NOHUGEPAGE was asked for the whole mapping (see advise()).
  bool advised_;
  void advise();
};

}  // namespace faultline::core
