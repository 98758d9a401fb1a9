#include "core/modules/module_snapshot.h"

#include <elf.h>
#include <link.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/base/safe_read.h"
#include "core/base/start_text.h"
#include "core/modules/module_snapshot_data.h"

namespace faultline::core {
namespace snapshot {

Buffer g_buffers[2];
volatile int g_published = -1;
volatile int g_readers[kMaxReaders] = {};

int begin_read() {
  int tid = static_cast<int>(syscall(SYS_gettid));
  for (int i = 0; i < kMaxReaders; ++i) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&g_readers[i], &expected, tid, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST)) {
      return i;
    }
  }
  return -1;
}

void end_read(int slot) {
  if (slot >= 0) __atomic_store_n(&g_readers[slot], 0, __ATOMIC_SEQ_CST);
}

bool reading() {
  for (int i = 0; i < kMaxReaders; ++i) {
    if (__atomic_load_n(&g_readers[i], __ATOMIC_SEQ_CST) != 0) return true;
  }
  return false;
}

FAULTLINE_START_TEXT void clear_readers() {
  // Only the slots in use: a fork child then copies no page of a table that
  // nobody read.
  for (int i = 0; i < kMaxReaders; ++i) {
    if (__atomic_load_n(&g_readers[i], __ATOMIC_SEQ_CST) != 0) {
      __atomic_store_n(&g_readers[i], 0, __ATOMIC_SEQ_CST);
    }
  }
}

}  // namespace snapshot

namespace {

using snapshot::Buffer;

// The first fields of a link_map node: the public part of glibc's layout.
struct LinkHead {
  uintptr_t l_addr;
  uintptr_t l_name;
  uintptr_t l_ld;
  uintptr_t l_next;
  uintptr_t l_prev;
};

bool head_matches(const LinkHead& h, const snapshot::Entry& e, uintptr_t next) {
  return h.l_addr == e.l_addr && h.l_name == e.l_name && h.l_ld == e.l_ld && h.l_next == next;
}

// True when the link map starts with exactly the snapshot's nodes, in
// order. *tail: the first node after them (modules loaded since the
// snapshot: the last dlopen's, as the snapshot is refreshed before each),
// 0 when there are none. All nodes are read with one process_vm_readv where
// the SafeReader uses it, else node by node.
bool snapshot_is_current(const Buffer& b, Arena* arena, uintptr_t* tail) {
  *tail = 0;
  uintptr_t first = 0;
  if (!safe_read_obj(&first, reinterpret_cast<uintptr_t>(&_r_debug) + offsetof(r_debug, r_map)))
    return false;
  if (!b.complete || b.count == 0 || first != b.r_map) return false;
  auto next_of = [&](int i) { return i + 1 < b.count ? b.entries[i + 1].node : 0; };
  // The last node may have gained a successor: the snapshot is then a
  // prefix of the link map.
  auto matches = [&](const LinkHead& h, int i) {
    if (head_matches(h, b.entries[i], next_of(i))) return true;
    if (i != b.count - 1 || h.l_next == 0) return false;
    LinkHead same = h;
    same.l_next = 0;
    if (!head_matches(same, b.entries[i], 0)) return false;
    *tail = h.l_next;
    return true;
  };
  if (safe_read_method() == SafeReadMethod::kVmReadv) {
    constexpr int kBatch = 512;  // under IOV_MAX
    LinkHead* heads = arena->alloc_array<LinkHead>(kBatch);
    iovec* local = arena->alloc_array<iovec>(kBatch);
    iovec* remote = arena->alloc_array<iovec>(kBatch);
    if (heads && local && remote) {
      pid_t pid = static_cast<pid_t>(syscall(SYS_getpid));
      for (int start = 0; start < b.count; start += kBatch) {
        int n = b.count - start < kBatch ? b.count - start : kBatch;
        for (int i = 0; i < n; ++i) {
          local[i] = {&heads[i], sizeof(LinkHead)};
          remote[i] = {reinterpret_cast<void*>(b.entries[start + i].node), sizeof(LinkHead)};
        }
        long got = syscall(SYS_process_vm_readv, pid, local, n, remote, n, 0);
        if (got != static_cast<long>(n * sizeof(LinkHead))) return false;
        for (int i = 0; i < n; ++i) {
          if (!matches(heads[i], start + i)) return false;
        }
      }
      return true;
    }
  }
  for (int i = 0; i < b.count; ++i) {
    LinkHead h;
    if (!safe_read_obj(&h, b.entries[i].node) || !matches(h, i)) return false;
  }
  return true;
}

void copy_bytes(void* dst, const void* src, size_t n) {
  __builtin_memcpy(dst, src, n);
}

}  // namespace

bool module_snapshot_use(ModuleTable* table, CfiModules* cfi, Arena* arena, uintptr_t* tail) {
  int slot = snapshot::begin_read();
  if (slot < 0) return false;
  int idx = __atomic_load_n(&snapshot::g_published, __ATOMIC_SEQ_CST);
  bool ok = false;
  if (idx == 0 || idx == 1) {
    const Buffer& b = snapshot::g_buffers[idx];
    uintptr_t after = 0;
    if (b.count <= table->capacity && snapshot_is_current(b, arena, &after) &&
        (after == 0 || tail)) {
      if (tail) *tail = after;
      CfiModule* sorted = arena->alloc_array<CfiModule>(static_cast<size_t>(b.ncfi));
      if (sorted || b.ncfi == 0) {
        int n = 0;
        for (int i = 0; i < b.count; ++i) {
          if (!b.entries[i].listed) continue;
          Module* m = &table->items[n++];
          *m = b.entries[i].info;
          m->path = arena->dup(b.entries[i].info.path, 4096);
        }
        table->count = n;
        table->truncated = false;
        if (b.ncfi) copy_bytes(sorted, b.cfi, sizeof(CfiModule) * static_cast<size_t>(b.ncfi));
        // The sparse indexes too: the buffer may be rewritten once we
        // stop reading it, the capture's copy stays.
        int32_t* index = arena->alloc_array<int32_t>(b.index_used ? b.index_used : 1);
        for (int i = 0; i < b.ncfi; ++i) {
          CfiModule& c = sorted[i];
          if (!c.index) continue;
          if (!index) {
            c.index = nullptr;
            c.index_len = 0;
            continue;
          }
          size_t off = static_cast<size_t>(c.index - b.index);
          copy_bytes(index + off, c.index, sizeof(int32_t) * c.index_len);
          c.index = index + off;
        }
        cfi->items = sorted;
        cfi->count = b.ncfi;
        ok = true;
      }
    }
  }
  snapshot::end_read(slot);
  return ok;
}

bool module_snapshot_known(uintptr_t node, uintptr_t l_addr, uintptr_t l_name, uintptr_t l_ld,
                           Module* out, Arena* arena) {
  int slot = snapshot::begin_read();
  if (slot < 0) return false;
  int idx = __atomic_load_n(&snapshot::g_published, __ATOMIC_SEQ_CST);
  bool found = false;
  if (idx == 0 || idx == 1) {
    const Buffer& b = snapshot::g_buffers[idx];
    for (int i = 0; i < b.count && !found; ++i) {
      const snapshot::Entry& e = b.entries[i];
      if (e.node == node && e.l_addr == l_addr && e.l_name == l_name && e.l_ld == l_ld &&
          e.listed) {
        *out = e.info;
        // The path lives in the buffer, which may be rewritten once we stop
        // reading it: copied now, as everything else.
        out->path = arena->dup(e.info.path, 4096);
        out->eh_frame_hdr = e.cfi.eh_frame_hdr;
        // The index too: without it each lookup in a big module probes its
        // table with a read per step (the buffer may be rewritten once we
        // stop reading it; the copy stays).
        int32_t* index = e.cfi.index ? arena->alloc_array<int32_t>(e.cfi.index_len) : nullptr;
        if (index) {
          copy_bytes(index, e.cfi.index, sizeof(int32_t) * e.cfi.index_len);
          out->cfi_index = index;
          out->cfi_index_len = e.cfi.index_len;
          out->cfi_count = e.cfi.count;
          out->cfi_table = e.cfi.table;
        }
        found = true;
      }
    }
  }
  snapshot::end_read(slot);
  return found;
}

void module_snapshot_end_reads() {
  int tid = static_cast<int>(syscall(SYS_gettid));
  for (int i = 0; i < snapshot::kMaxReaders; ++i) {
    int expected = tid;
    __atomic_compare_exchange_n(&snapshot::g_readers[i], &expected, 0, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
  }
}

bool cfi_modules_append(const ModuleTable& table, int from, CfiModules* cfi, Arena* arena) {
  int extra = table.count - from;
  if (extra <= 0) return true;
  CfiModule* out = arena->alloc_array<CfiModule>(static_cast<size_t>(cfi->count + extra));
  if (!out) return false;
  int n = cfi->count;
  if (n) copy_bytes(out, cfi->items, sizeof(CfiModule) * static_cast<size_t>(n));
  for (int i = from; i < table.count; ++i) {
    const Module& m = table.items[i];
    if (m.end <= m.base) continue;
    // Insertion sort by start address: a few hundred modules at most.
    int j = n++;
    while (j > 0 && out[j - 1].lo > m.base) {
      out[j] = out[j - 1];
      --j;
    }
    out[j] = {m.base,          m.end,       m.eh_frame_hdr, m.cfi_index,
              m.cfi_index_len, m.cfi_count, m.cfi_table};
  }
  cfi->items = out;
  cfi->count = n;
  return true;
}

bool cfi_modules_from_table(const ModuleTable& table, CfiModules* cfi, Arena* arena) {
  cfi->items = nullptr;
  cfi->count = 0;
  return cfi_modules_append(table, 0, cfi, arena);
}

int module_snapshot_count() {
  int idx = __atomic_load_n(&snapshot::g_published, __ATOMIC_ACQUIRE);
  return idx == 0 || idx == 1 ? snapshot::g_buffers[idx].count : 0;
}

}  // namespace faultline::core
