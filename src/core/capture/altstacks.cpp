#include "core/capture/altstacks.h"

#include "core/base/arena.h"
#include "core/crash_state.h"

namespace faultline::core {
namespace {

struct Entry {
  pid_t tid;  // 0: never used; -1: withdrawn (atomic)
  uintptr_t lo;
  uintptr_t hi;
};

constexpr int kSlots = 2048;
// Lookups stop at the first never-used slot, so a thread finds its entry
// within the few slots probed from its home; a full run of slots ends the
// probe too (then the thread is simply not prefaulted).
constexpr int kMaxProbe = 64;
Entry g_entries[kSlots];

int home(pid_t tid) {
  return static_cast<int>(static_cast<unsigned>(tid) % kSlots);
}

Entry* find(pid_t tid) {
  for (int i = 0, at = home(tid); i < kMaxProbe; ++i, at = (at + 1) % kSlots) {
    pid_t owner = __atomic_load_n(&g_entries[at].tid, __ATOMIC_ACQUIRE);
    if (owner == tid) return &g_entries[at];
    if (owner == 0) return nullptr;
  }
  return nullptr;
}

// Withdrawn: skipped by readers (hi = 0), its slot free for reuse.
void withdraw(Entry* e) {
  __atomic_store_n(&e->hi, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&e->tid, -1, __ATOMIC_RELEASE);
}

}  // namespace

void altstack_register(pid_t tid, void* lo, size_t size) {
  if (tid <= 0 || !lo || size == 0) return;
  uintptr_t l = reinterpret_cast<uintptr_t>(lo);
  // hi = 0 while the slot is rewritten: a concurrent reader sees its two
  // reads of hi differ, or hi <= lo, and skips it (altstack_prefault).
  auto set = [&](Entry* e) {
    __atomic_store_n(&e->hi, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&e->lo, l, __ATOMIC_RELEASE);
    __atomic_store_n(&e->hi, l + size, __ATOMIC_RELEASE);
  };
  if (Entry* e = find(tid)) {  // a stale entry of an earlier thread with this id
    set(e);
    return;
  }
  for (int i = 0, at = home(tid); i < kMaxProbe; ++i, at = (at + 1) % kSlots) {
    Entry* e = &g_entries[at];
    pid_t owner = __atomic_load_n(&e->tid, __ATOMIC_ACQUIRE);
    if (owner != 0 && owner != -1) continue;
    if (__atomic_compare_exchange_n(&e->tid, &owner, tid, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
      set(e);
      return;
    }
  }
}

void altstack_forget(pid_t tid, void* lo) {
  Entry* e = find(tid);
  if (e && __atomic_load_n(&e->lo, __ATOMIC_ACQUIRE) == reinterpret_cast<uintptr_t>(lo))
    withdraw(e);
}

void altstack_forget_range(void* lo) {
  uintptr_t l = reinterpret_cast<uintptr_t>(lo);
  for (Entry& e : g_entries) {
    pid_t owner = __atomic_load_n(&e.tid, __ATOMIC_ACQUIRE);
    if (owner > 0 && __atomic_load_n(&e.lo, __ATOMIC_ACQUIRE) == l) withdraw(&e);
  }
}

bool altstack_prefault(pid_t tid, size_t bytes) {
  // hi, lo, hi: a rewrite (hi = 0, lo, hi) between the reads shows as two
  // different his, so lo and hi always come from one range.
  uintptr_t lo = 0, hi = 0, hi_again = 1;
  if (Entry* e = find(tid)) {
    hi = __atomic_load_n(&e->hi, __ATOMIC_ACQUIRE);
    lo = __atomic_load_n(&e->lo, __ATOMIC_ACQUIRE);
    hi_again = __atomic_load_n(&e->hi, __ATOMIC_ACQUIRE);
  } else if (tid == __atomic_load_n(&g_crash.altstack_tid, __ATOMIC_ACQUIRE)) {
    hi = __atomic_load_n(&g_crash.altstack_hi, __ATOMIC_ACQUIRE);
    lo = __atomic_load_n(&g_crash.altstack_lo, __ATOMIC_ACQUIRE);
    hi_again = __atomic_load_n(&g_crash.altstack_hi, __ATOMIC_ACQUIRE);
  }
  if (hi != hi_again || hi <= lo) return false;  // withdrawn or being rewritten
  uintptr_t from = hi - lo > bytes ? hi - bytes : lo;
  populate_pages(reinterpret_cast<void*>(from), reinterpret_cast<void*>(hi));
  return true;
}

}  // namespace faultline::core
