// The module snapshot's buffers, shared by the refresh (install time,
// src/install/module_snapshot_refresh.cpp) and the crash-time reader
// (module_snapshot.cpp). Nothing else uses them.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/capture.h"
#include "core/unwind/cfi/engine.h"

namespace faultline::core::snapshot {

struct Entry {
  uintptr_t node;    // the link_map node
  uintptr_t l_addr;  // its load bias
  uintptr_t l_name;  // its name pointer (the loader never changes either)
  uintptr_t l_ld;    // its dynamic section: dlclose(A) then dlopen(B) may give
                     // B A's node, load address and name buffer, not A's l_ld
  Module info;       // path points into Buffer::pool
  CfiModule cfi;     // its index points into Buffer::index
  bool listed;       // has a mapped range (the crash-time walk skips the others too)
};

constexpr int kMaxModules = 1024;
constexpr size_t kPoolBytes = 256u << 10;
constexpr size_t kIndexEntries = 64u << 10;  // the unwinder's sparse indexes

struct Buffer {
  uintptr_t r_map;  // the first node
  int count;
  bool complete;  // every module fitted
  Entry entries[kMaxModules];
  CfiModule cfi[kMaxModules];  // sorted by lo
  int ncfi;
  size_t pool_used;
  char pool[kPoolBytes];
  size_t index_used;
  int32_t index[kIndexEntries];
};

// Two buffers; `published` is the index of the current one, -1 before the
// first refresh. `readers` holds the tids of the crash-time readers (0: a
// free slot): a refresh never writes a buffer while one is reading. Per
// thread, so that a read abandoned by a fault or the watchdog (a siglongjmp
// out of it) is released by its own thread when the phase ends
// (module_snapshot_end_reads), not left to block every later refresh.
constexpr int kMaxReaders = 8;
extern Buffer g_buffers[2];
extern volatile int g_published;
extern volatile int g_readers[kMaxReaders];

// A reader's slot (-1: all taken, do not read) and its release.
int begin_read();
void end_read(int slot);
// True while any thread holds a slot.
bool reading();
// After a fork: only the forking thread lives on.
void clear_readers();

}  // namespace faultline::core::snapshot
