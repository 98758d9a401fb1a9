// Install-time half of the module snapshot (install/module_snapshot_refresh.h):
// reads the loaded modules under the loader's lock and publishes them for the
// crash handler. Not signal-safe.
#include "install/module_snapshot_refresh.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "core/modules/module_snapshot.h"
#include "core/modules/module_snapshot_data.h"

namespace faultline::core {
namespace {

using snapshot::Buffer;
using snapshot::Entry;

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
pid_t g_refresher = 0;           // the thread refreshing now (atomic)
bool g_locked_for_fork = false;  // the lock is held across a fork
bool g_fork_child = false;       // this process is a fork child: never refresh
// dl_iterate_phdr's counters of loads and unloads at the last refresh.
unsigned long long g_adds = 0, g_subs = 0;
bool g_refreshed = false;

struct Counters {
  unsigned long long adds, subs;
};

int read_counters(dl_phdr_info* info, size_t size, void* arg) {
  Counters* c = static_cast<Counters*>(arg);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    c->adds = info->dlpi_adds;
    c->subs = info->dlpi_subs;
  }
  return 1;  // the first module is enough
}

struct Node {
  uintptr_t node, l_addr, l_name, l_ld;
};

struct Walk {
  Buffer* out;
  const Buffer* old;
  Node nodes[snapshot::kMaxModules];
  bool seen[snapshot::kMaxModules];
  int nnodes;
  bool first_call;
  bool overflow;
  char exe[4096];
};

// The unwinder's sparse index of a module's .eh_frame_hdr search table
// (see CfiModule), into the buffer's index pool.
void make_index(Buffer* b, CfiModule* c) {
  c->index = nullptr;
  c->index_len = 0;
  c->table = 0;
  c->count = 0;
  const uint8_t* hdr = reinterpret_cast<const uint8_t*>(c->eh_frame_hdr);
  // version 1, eh_frame_ptr any 4-byte encoding, count udata4/sdata4
  // (0x03/0x0b, optionally datarel), table datarel sdata4: what ld writes.
  auto four_bytes = [](uint8_t enc) { return (enc & 0x0f) == 0x03 || (enc & 0x0f) == 0x0b; };
  if (!hdr || hdr[0] != 1 || !four_bytes(hdr[1]) || !four_bytes(hdr[2]) || hdr[3] != 0x3b) return;
  uint32_t count;
  memcpy(&count, hdr + 8, 4);
  const int32_t* table = reinterpret_cast<const int32_t*>(hdr + 12);
  uint32_t n = (count + kCfiIndexStride - 1) / kCfiIndexStride;
  if (count == 0 || b->index_used + n > snapshot::kIndexEntries) return;
  int32_t* out = b->index + b->index_used;
  for (uint32_t i = 0; i < n; ++i) out[i] = table[2 * static_cast<size_t>(i) * kCfiIndexStride];
  b->index_used += n;
  c->index = out;
  c->index_len = n;
  c->table = reinterpret_cast<uintptr_t>(table);
  c->count = count;
}

// A reused module's index, copied from the old buffer.
void copy_index(Buffer* b, CfiModule* c) {
  if (!c->index) return;
  if (b->index_used + c->index_len > snapshot::kIndexEntries) {
    c->index = nullptr;
    c->index_len = 0;
    return;
  }
  int32_t* out = b->index + b->index_used;
  memcpy(out, c->index, sizeof(int32_t) * c->index_len);
  b->index_used += c->index_len;
  c->index = out;
}

const char* pool_add(Buffer* b, const char* s) {
  size_t n = strlen(s) + 1;
  if (b->pool_used + n > sizeof b->pool) {
    b->complete = false;
    return "";
  }
  char* p = b->pool + b->pool_used;
  memcpy(p, s, n);
  b->pool_used += n;
  return p;
}

// Base, end, build-id and .eh_frame_hdr from the program headers; the
// memory is the loader's own and mapped (we hold its lock).
void read_headers(Entry* e, const dl_phdr_info* info) {
  Module& m = e->info;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      if (ph.p_vaddr < lo) lo = ph.p_vaddr;
      if (ph.p_vaddr + ph.p_memsz > hi) hi = ph.p_vaddr + ph.p_memsz;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      e->cfi.eh_frame_hdr = info->dlpi_addr + ph.p_vaddr;
      m.eh_frame_hdr = e->cfi.eh_frame_hdr;
    } else if (ph.p_type == PT_NOTE && m.build_id_len == 0) {
      const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
      const char* end = p + ph.p_memsz;
      while (p + sizeof(ElfW(Nhdr)) <= end) {
        const ElfW(Nhdr)* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
        const char* name = p + sizeof *nh;
        const char* desc = name + ((nh->n_namesz + 3) & ~3u);
        if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && nh->n_descsz > 0 &&
            nh->n_descsz <= sizeof m.build_id && memcmp(name, "GNU", 4) == 0) {
          memcpy(m.build_id, desc, nh->n_descsz);
          m.build_id_len = static_cast<uint8_t>(nh->n_descsz);
          break;
        }
        p = desc + ((nh->n_descsz + 3) & ~3u);
      }
    }
  }
  if (lo < hi) {
    m.base = info->dlpi_addr + (lo & ~static_cast<uintptr_t>(4095));
    m.end = info->dlpi_addr + hi;
  }
}

int on_module(dl_phdr_info* info, size_t, void* arg) {
  Walk* w = static_cast<Walk*>(arg);
  if (w->first_call) {
    // The link map itself, consistent because the loader's lock is held.
    w->first_call = false;
    for (link_map* l = _r_debug.r_map; l; l = l->l_next) {
      if (w->nnodes >= snapshot::kMaxModules) {
        w->overflow = true;
        break;
      }
      w->nodes[w->nnodes++] = {reinterpret_cast<uintptr_t>(l), l->l_addr,
                               reinterpret_cast<uintptr_t>(l->l_name),
                               reinterpret_cast<uintptr_t>(l->l_ld)};
    }
  }
  uintptr_t name = reinterpret_cast<uintptr_t>(info->dlpi_name);
  int idx = -1;
  for (int i = 0; i < w->nnodes; ++i) {
    if (w->nodes[i].l_addr == info->dlpi_addr && w->nodes[i].l_name == name) {
      idx = i;
      break;
    }
  }
  if (idx < 0) return 0;  // another namespace: the crash-time walk skips it too
  if (w->seen[idx]) return 0;
  w->seen[idx] = true;
  Entry* e = &w->out->entries[idx];
  const Node& n = w->nodes[idx];
  if (w->old) {
    // Usually at the same index as before: look there first.
    for (int k = 0; k < w->old->count; ++k) {
      int i = (idx + k) % w->old->count;
      const Entry& o = w->old->entries[i];
      if (o.node == n.node && o.l_addr == n.l_addr && o.l_name == n.l_name && o.l_ld == n.l_ld) {
        *e = o;
        e->info.path = pool_add(w->out, o.info.path);
        copy_index(w->out, &e->cfi);
        return 0;
      }
    }
  }
  *e = Entry{};
  e->node = n.node;
  e->l_addr = n.l_addr;
  e->l_name = n.l_name;
  e->l_ld = n.l_ld;
  e->info.bias = info->dlpi_addr;
  bool main_exe = idx == 0 && (!info->dlpi_name || !info->dlpi_name[0]);
  e->info.is_main = main_exe;
  uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
  e->info.is_vdso = vdso && info->dlpi_addr == vdso;
  e->info.path = pool_add(w->out, main_exe ? w->exe : info->dlpi_name ? info->dlpi_name : "");
  read_headers(e, info);
  e->listed = e->info.end > e->info.base;
  e->cfi.lo = e->info.base;
  e->cfi.hi = e->info.end;
  make_index(w->out, &e->cfi);
  return 0;
}

}  // namespace

void module_snapshot_before_fork() {
  // Not if this thread forks from a signal handler that interrupted its own
  // refresh: it holds the lock already.
  if (__atomic_load_n(&g_refresher, __ATOMIC_ACQUIRE) == static_cast<pid_t>(gettid())) return;
  pthread_mutex_lock(&g_mutex);
  g_locked_for_fork = true;
}

void module_snapshot_after_fork_parent() {
  if (!g_locked_for_fork) return;
  g_locked_for_fork = false;
  pthread_mutex_unlock(&g_mutex);
}

void module_snapshot_after_fork() {
  // Another thread of the parent may have held the loader's lock at the
  // fork (inside dlopen or dlclose); glibc does not reset it, so in the child
  // dl_iterate_phdr may wait forever. The child keeps the parent's snapshot
  // (used while the link map still matches it; else the crash-time walk).
  g_fork_child = true;
  // Only the forking thread lives on: nobody holds the lock or reads.
  g_mutex = PTHREAD_MUTEX_INITIALIZER;
  g_locked_for_fork = false;
  __atomic_store_n(&g_refresher, 0, __ATOMIC_RELEASE);
  snapshot::clear_readers();
}

bool module_snapshot_refresh(bool wait) {
  static Walk walk;  // big: not on the stack of whatever thread called dlopen
  if (g_fork_child) return false;
  // The lock first, then the loader's (inside dl_iterate_phdr): a fork waits
  // for the lock (module_snapshot_before_fork), so it never happens while
  // this thread holds the loader's lock, which glibc does not reset in the
  // child.
  if (!wait) {
    if (pthread_mutex_trylock(&g_mutex) != 0) return false;
  } else {
    pthread_mutex_lock(&g_mutex);
  }
  __atomic_store_n(&g_refresher, static_cast<pid_t>(gettid()), __ATOMIC_RELEASE);
  Counters now = {~0ull, ~0ull};
  dl_iterate_phdr(read_counters, &now);
  if (g_refreshed && now.adds == g_adds && now.subs == g_subs) {
    __atomic_store_n(&g_refresher, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_mutex);  // nothing loaded or unloaded since
    return false;
  }
  int pub = __atomic_load_n(&snapshot::g_published, __ATOMIC_SEQ_CST);
  int target = pub == 0 ? 1 : 0;
  if (snapshot::reading()) {
    __atomic_store_n(&g_refresher, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_mutex);  // a crash is reading: leave both buffers alone
    return true;
  }
  Buffer* b = &snapshot::g_buffers[target];
  b->count = 0;
  b->ncfi = 0;
  b->pool_used = 0;
  b->index_used = 0;
  b->complete = true;
  b->r_map = 0;
  walk.out = b;
  walk.old = pub >= 0 ? &snapshot::g_buffers[pub] : nullptr;
  walk.nnodes = 0;
  walk.first_call = true;
  walk.overflow = false;
  // As the crash-time walk names it (modules_exe_path()).
  snprintf(walk.exe, sizeof walk.exe, "%s", modules_exe_path());
  memset(walk.seen, 0, sizeof walk.seen);
  dl_iterate_phdr(on_module, &walk);
  b->count = walk.nnodes;
  b->r_map = walk.nnodes ? walk.nodes[0].node : 0;
  if (walk.overflow) b->complete = false;
  for (int i = 0; i < b->count; ++i) {
    const Entry& e = b->entries[i];
    if (!walk.seen[i]) {
      b->complete = false;  // a node dl_iterate_phdr did not report
      continue;
    }
    if (!e.listed) continue;
    int j = b->ncfi++;
    while (j > 0 && b->cfi[j - 1].lo > e.info.base) {
      b->cfi[j] = b->cfi[j - 1];
      --j;
    }
    b->cfi[j] = e.cfi;
  }
  __atomic_store_n(&snapshot::g_published, target, __ATOMIC_SEQ_CST);
  g_adds = now.adds;
  g_subs = now.subs;
  g_refreshed = now.adds != ~0ull;
  __atomic_store_n(&g_refresher, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_mutex);
  return true;
}

}  // namespace faultline::core
