#include "core/capture/annotations.h"

#include <errno.h>
#include <time.h>

#include "core/base/arch.h"
#include "core/base/start_text.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/base/thread_state.h"
#include "core/capture/annotation_tables.h"

namespace faultline::core {
namespace {

// Writers of one slot exclude each other by making its sequence number odd
// with a compare-and-swap; readers never wait, they retry a few times and
// then skip.
template <typename S>
bool slot_lock(S* s) {
  for (int spins = 0; spins < 1 << 20; ++spins) {
    uint32_t v = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
    if ((v & 1) == 0 && __atomic_compare_exchange_n(&s->seq, &v, v + 1, false, __ATOMIC_ACQUIRE,
                                                    __ATOMIC_RELAXED)) {
      return true;
    }
  }
  return false;  // a writer died inside (crashed mid-write): give up
}

template <typename S>
void slot_unlock(S* s) {
  __atomic_fetch_add(&s->seq, 1, __ATOMIC_RELEASE);
}

// Copies a slot consistently; false if it stayed mid-write.
template <typename S>
bool slot_read(const S* s, S* copy) {
  for (int tries = 0; tries < 64; ++tries) {
    uint32_t before = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    if (before & 1) continue;
    __builtin_memcpy(copy, s, sizeof *s);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == before) return true;
  }
  return false;
}

GlobalSlot g_annotations[kMaxAnnotations];
// One past the highest slot of g_annotations ever claimed; 0 while none
// ever was (atomic, only grows). Slots are claimed from the first free one
// on, so lookups and the crash's snapshot read no further: a process that
// never sets a key reads none of the table (~37 KiB of pages it never
// touched, ten page faults at each crash).
int g_annotations_limit = 0;
// Thread annotations: a table of per-thread slot sets, keyed by thread id
// and thread pointer (not TLS: see thread_state.h). A set is claimed on the
// thread's first annotation and kept while the thread lives; the set of a
// thread that has exited is reused (ThreadTable: annotation_tables.h).
ThreadTable g_thread_tables[kMaxAnnotatedThreads];
// How many probes from a thread's home index reach every claimed set: the
// farthest from its home any set was claimed, plus one; 0 while none ever
// was (atomic, only grows). Lookups probe no further, so a process without
// thread annotations never reads the table (~670 KiB of pages it never
// touched, faulted in at each crash and each lookup).
int g_probe_limit = 0;
Crumb g_crumbs[kMaxBreadcrumbs];
uint64_t g_crumb_next;

// The slots of table a reader must look at: up to *limit where the table
// keeps one (see g_annotations_limit), else all.
template <int N>
int slots_in_use(const int* limit) {
  int n = limit ? __atomic_load_n(limit, __ATOMIC_ACQUIRE) : N;
  return n < 0 ? 0 : n < N ? n : N;
}

// Sets, replaces or (value nullptr) removes key in table. limit: the
// table's high-water mark, or nullptr for a table without one.
template <typename S, int N>
int table_set(S (&table)[N], int* limit, const char* key, const char* value) {
  if (!key || !*key || str_len(key) >= kAnnotationKeyBytes) return -EINVAL;
  // An existing slot with this key, else a free one.
  S* target = nullptr;
  const int in_use = slots_in_use<N>(limit);
  for (int i = 0; i < in_use; ++i) {
    S& s = table[i];
    if (__atomic_load_n(&s.used, __ATOMIC_ACQUIRE) && str_eq(s.key, key)) {
      target = &s;
      break;
    }
  }
  if (!target) {
    if (!value) return 0;
    for (int i = 0; i < N && !target; ++i) {
      uint32_t expected = 0;
      if (__atomic_compare_exchange_n(&table[i].used, &expected, 2u, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED)) {
        target = &table[i];  // used == 2: claimed, key not yet visible
        // Raised before the key is published (used == 1 below).
        int seen = limit ? __atomic_load_n(limit, __ATOMIC_ACQUIRE) : N;
        while (seen < i + 1 && !__atomic_compare_exchange_n(limit, &seen, i + 1, false,
                                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        }
      }
    }
    if (!target) return -ENOSPC;
  }
  if (!slot_lock(target)) return -EBUSY;
  if (value) {
    str_copy(target->key, sizeof target->key, key);
    str_copy(target->value, sizeof target->value, value);
    __atomic_store_n(&target->used, 1u, __ATOMIC_RELEASE);
  } else {
    target->key[0] = '\0';
    __atomic_store_n(&target->used, 0u, __ATOMIC_RELEASE);
  }
  slot_unlock(target);
  return 0;
}

// Copies the first in_use slots of table (at most N).
template <typename S, int N>
int table_snapshot(const S* table, int in_use, AnnotationView* out, int cap, char* storage,
                   size_t storage_bytes) {
  int n = 0;
  size_t off = 0;
  in_use = slots_in_use<N>(&in_use);
  for (int i = 0; i < in_use; ++i) {
    const S& s = table[i];
    if (n >= cap) break;
    if (__atomic_load_n(&s.used, __ATOMIC_ACQUIRE) != 1) continue;
    S copy;
    if (!slot_read(&s, &copy) || copy.used != 1 || !copy.key[0]) continue;
    size_t klen = str_nlen(copy.key, sizeof copy.key - 1);
    size_t vlen = str_nlen(copy.value, sizeof copy.value - 1);
    // Two threads setting the same new key at once can each claim a slot:
    // the first (lowest) one counts, so the report never has a key twice.
    copy.key[klen] = '\0';  // the copy may not be terminated
    bool seen = false;
    for (int j = 0; j < n && !seen; ++j) seen = str_eq(out[j].key, copy.key);
    if (seen) continue;
    if (off + klen + vlen + 2 > storage_bytes) break;
    char* k = storage + off;
    str_copy_n(k, klen + 1, copy.key, klen);
    off += klen + 1;
    char* v = storage + off;
    str_copy_n(v, vlen + 1, copy.value, vlen);
    off += vlen + 1;
    out[n++] = {k, v};
  }
  return n;
}

}  // namespace

int annotation_set(const char* key, const char* value) {
  return table_set(g_annotations, &g_annotations_limit, key, value);
}

namespace {

// The calling thread's id without a system call: glibc keeps it in the
// thread's struct pthread (pthread_self_address()), at an offset found once by scanning for
// the id the kernel gives (used only when exactly one word matches).
long g_tid_offset = -2;  // -2: not looked for yet, -1: not usable

pid_t current_tid() {
  uintptr_t self = pthread_self_address();
  long off = __atomic_load_n(&g_tid_offset, __ATOMIC_RELAXED);
  if (off >= 0) return *reinterpret_cast<const pid_t*>(self + static_cast<uintptr_t>(off));
  pid_t tid = sys_gettid();
  if (off == -2) {
    const auto* words = reinterpret_cast<const int32_t*>(self);
    long found = -1;
    int matches = 0;
    for (int i = 0; self && i < 512; ++i) {
      if (words[i] == tid) {
        found = i * 4L;
        ++matches;
      }
    }
    __atomic_store_n(&g_tid_offset, matches == 1 ? found : -1L, __ATOMIC_RELAXED);
  }
  return tid;
}

// Tables are looked for from the thread's home position on.
int home(pid_t tid) {
  return static_cast<int>(static_cast<unsigned>(tid) % kMaxAnnotatedThreads);
}

void raise_probe_limit(int probes) {
  int now = __atomic_load_n(&g_probe_limit, __ATOMIC_ACQUIRE);
  while (now < probes && !__atomic_compare_exchange_n(&g_probe_limit, &now, probes, false,
                                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
  }
}

ThreadTable* own_table(pid_t tid, uintptr_t self) {
  int limit = __atomic_load_n(&g_probe_limit, __ATOMIC_ACQUIRE);
  return const_cast<ThreadTable*>(thread_table_of(g_thread_tables, limit, tid, self));
}

ThreadTable* claim_table(pid_t tid, uintptr_t self) {
  // A set still keyed to this id belongs to an exited thread (ids are unique
  // among live threads); then a free set; then one of an exited thread.
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0, at = home(tid); i < kMaxAnnotatedThreads;
         ++i, at = (at + 1) % kMaxAnnotatedThreads) {
      ThreadTable& t = g_thread_tables[at];
      pid_t owner = __atomic_load_n(&t.tid, __ATOMIC_ACQUIRE);
      bool want = pass == 0 ? owner == tid : pass == 1 ? owner == 0 : thread_is_gone(owner);
      if (!want || !__atomic_compare_exchange_n(&t.tid, &owner, tid, false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_RELAXED)) {
        continue;
      }
      raise_probe_limit(i + 1);  // before the set is used: lookups reach it
      __atomic_store_n(&t.self, 0, __ATOMIC_RELEASE);
      for (ThreadSlot& s : t.slots) {
        s.key[0] = '\0';
        __atomic_store_n(&s.used, 0u, __ATOMIC_RELEASE);
      }
      __atomic_store_n(&t.self, self, __ATOMIC_RELEASE);
      return &t;
    }
  }
  return nullptr;
}

}  // namespace

int thread_annotation_set(const char* key, const char* value) {
  pid_t tid = current_tid();
  uintptr_t self = thread_pointer();
  ThreadTable* t = own_table(tid, self);
  if (!t) {
    if (!value) return 0;
    if (!key || !*key || str_len(key) >= kAnnotationKeyBytes) return -EINVAL;
    int saved_errno = errno;
    t = claim_table(tid, self);
    errno = saved_errno;
    if (!t) return -ENOSPC;
  }
  return table_set(t->slots, nullptr, key, value);
}

FAULTLINE_START_TEXT void thread_annotations_after_fork() {
  // Only the forking thread lives on, under a new id: keep its set.
  if (__atomic_load_n(&g_probe_limit, __ATOMIC_ACQUIRE) == 0) return;  // never used
  uintptr_t self = thread_pointer();
  pid_t tid = sys_gettid();
  for (int at = 0; at < kMaxAnnotatedThreads; ++at) {
    ThreadTable& t = g_thread_tables[at];
    if (__atomic_load_n(&t.tid, __ATOMIC_ACQUIRE) == 0) continue;
    if (__atomic_load_n(&t.self, __ATOMIC_ACQUIRE) == self) {
      // Keyed to the new id, whose home is elsewhere: lookups must reach it.
      raise_probe_limit((at - home(tid) + kMaxAnnotatedThreads) % kMaxAnnotatedThreads + 1);
      __atomic_store_n(&t.tid, tid, __ATOMIC_RELEASE);
    } else {
      __atomic_store_n(&t.self, 0, __ATOMIC_RELEASE);
      __atomic_store_n(&t.tid, 0, __ATOMIC_RELEASE);
    }
  }
}

void breadcrumb_add(const char* message) {
  uint64_t order = __atomic_fetch_add(&g_crumb_next, 1, __ATOMIC_RELAXED);
  Crumb* c = &g_crumbs[order % kMaxBreadcrumbs];
  if (!slot_lock(c)) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  c->sec = ts.tv_sec;
  c->nsec = ts.tv_nsec;
  c->order = order;
  str_copy(c->text, sizeof c->text, message ? message : "");
  c->used = 1;
  slot_unlock(c);
}

const ThreadTable* thread_table_of(const ThreadTable* tables, int probe_limit, pid_t tid,
                                   uintptr_t self) {
  int limit = probe_limit < kMaxAnnotatedThreads ? probe_limit : kMaxAnnotatedThreads;
  for (int i = 0, at = home(tid); i < limit; ++i, at = (at + 1) % kMaxAnnotatedThreads) {
    const ThreadTable& t = tables[at];
    if (__atomic_load_n(&t.tid, __ATOMIC_ACQUIRE) == tid &&
        __atomic_load_n(&t.self, __ATOMIC_ACQUIRE) == self) {
      return &t;
    }
  }
  return nullptr;
}

int annotation_table_snapshot(const GlobalSlot* table, int in_use, AnnotationView* out, int cap,
                              char* storage, size_t storage_bytes) {
  return table_snapshot<GlobalSlot, kMaxAnnotations>(table, in_use, out, cap, storage,
                                                     storage_bytes);
}

int thread_table_snapshot(const ThreadTable& t, AnnotationView* out, int cap, char* storage,
                          size_t storage_bytes) {
  return table_snapshot<ThreadSlot, kMaxThreadAnnotations>(t.slots, kMaxThreadAnnotations, out, cap,
                                                           storage, storage_bytes);
}

int breadcrumb_ring_snapshot(const Crumb* crumbs, uint64_t next, BreadcrumbView* out, int cap,
                             char* storage, size_t storage_bytes) {
  uint64_t first = next > kMaxBreadcrumbs ? next - kMaxBreadcrumbs : 0;
  int n = 0;
  size_t off = 0;
  for (uint64_t i = first; i < next && n < cap; ++i) {
    Crumb copy;
    if (!slot_read(&crumbs[i % kMaxBreadcrumbs], &copy) || !copy.used || copy.order != i) {
      continue;
    }
    size_t len = str_nlen(copy.text, sizeof copy.text - 1);
    if (off + len + 1 > storage_bytes) break;
    char* m = storage + off;
    str_copy_n(m, len + 1, copy.text, len);
    off += len + 1;
    out[n++] = {copy.sec, copy.nsec, m};
  }
  return n;
}

int annotations_snapshot(AnnotationView* out, int cap, char* storage, size_t storage_bytes) {
  return annotation_table_snapshot(g_annotations,
                                   slots_in_use<kMaxAnnotations>(&g_annotations_limit), out, cap,
                                   storage, storage_bytes);
}

int thread_annotations_snapshot(AnnotationView* out, int cap, char* storage, size_t storage_bytes) {
  ThreadTable* t = own_table(sys_gettid(), thread_pointer());
  return t ? thread_table_snapshot(*t, out, cap, storage, storage_bytes) : 0;
}

int breadcrumbs_snapshot(BreadcrumbView* out, int cap, char* storage, size_t storage_bytes) {
  return breadcrumb_ring_snapshot(g_crumbs, __atomic_load_n(&g_crumb_next, __ATOMIC_ACQUIRE), out,
                                  cap, storage, storage_bytes);
}

bool remote_tables_match(const RemoteTables& t) {
  const RemoteTables& own = faultline_remote_tables;
  return t.magic == own.magic && t.version == own.version && t.size == own.size &&
         t.global_slot_size == own.global_slot_size &&
         t.thread_table_size == own.thread_table_size && t.crumb_size == own.crumb_size &&
         t.key_bytes == own.key_bytes && t.value_bytes == own.value_bytes &&
         t.thread_value_bytes == own.thread_value_bytes &&
         t.breadcrumb_bytes == own.breadcrumb_bytes && t.max_annotations == own.max_annotations &&
         t.max_thread_annotations == own.max_thread_annotations &&
         t.max_annotated_threads == own.max_annotated_threads &&
         t.max_breadcrumbs == own.max_breadcrumbs;
}

}  // namespace faultline::core

// Constant data (relocated once at load): where the tables are, for
// `faultline dump` by ptrace, which reads them out of the stopped process.
extern "C" const faultline::core::RemoteTables faultline_remote_tables = {
    faultline::core::kRemoteTablesMagic,
    faultline::core::kRemoteTablesVersion,
    sizeof(faultline::core::RemoteTables),
    sizeof(faultline::core::GlobalSlot),
    sizeof(faultline::core::ThreadTable),
    sizeof(faultline::core::Crumb),
    faultline::core::kAnnotationKeyBytes,
    faultline::core::kAnnotationValueBytes,
    faultline::core::kThreadValueBytes,
    faultline::core::kBreadcrumbBytes,
    faultline::core::kMaxAnnotations,
    faultline::core::kMaxThreadAnnotations,
    faultline::core::kMaxAnnotatedThreads,
    faultline::core::kMaxBreadcrumbs,
    faultline::core::g_annotations,
    &faultline::core::g_annotations_limit,
    faultline::core::g_thread_tables,
    &faultline::core::g_probe_limit,
    faultline::core::g_crumbs,
    &faultline::core::g_crumb_next,
};
