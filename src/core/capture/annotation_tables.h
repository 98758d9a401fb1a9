// The storage of annotations and breadcrumbs (annotations.h) and the
// snapshots that copy it: the crash path reads the process's own tables,
// `faultline dump` by ptrace reads copies of another process's, found
// through the descriptor the library exports (faultline_remote_tables).
// The snapshots trust nothing in a table: a slot mid-write is skipped,
// strings are cut at their buffer, counts are clamped to the table.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/capture/annotations.h"

namespace faultline::core {

// A slot guarded by a sequence number: odd while a writer is inside.
template <size_t KeyBytes, size_t ValueBytes>
struct Slot {
  uint32_t seq;
  uint32_t used;  // 1: set; 2: claimed, key not yet visible; 0: free
  char key[KeyBytes];
  char value[ValueBytes];
};

using GlobalSlot = Slot<kAnnotationKeyBytes, kAnnotationValueBytes>;
using ThreadSlot = Slot<kAnnotationKeyBytes, kThreadValueBytes>;

struct Crumb {
  uint32_t seq;
  uint32_t used;
  int64_t sec, nsec;
  uint64_t order;
  char text[kBreadcrumbBytes];
};

// One thread's set of thread annotations, keyed by thread id and thread
// pointer (annotations.cpp).
struct ThreadTable {
  pid_t tid;       // 0: free (atomic)
  uintptr_t self;  // the owner's thread pointer, stored last (atomic)
  ThreadSlot slots[kMaxThreadAnnotations];
};

// Snapshots over tables given by address (the process's own or a copy):
// `in_use` slots of `table` (clamped to kMaxAnnotations), the set of
// thread (tid, self) among `tables` (kMaxAnnotatedThreads sets, looked for
// within `probe_limit` probes of its home), the ring `crumbs` whose next
// breadcrumb is number `next`. Strings go to `storage`; each returns the
// number of entries written to `out` (at most cap).
int annotation_table_snapshot(const GlobalSlot* table, int in_use, AnnotationView* out, int cap,
                              char* storage, size_t storage_bytes);
const ThreadTable* thread_table_of(const ThreadTable* tables, int probe_limit, pid_t tid,
                                   uintptr_t self);
int thread_table_snapshot(const ThreadTable& t, AnnotationView* out, int cap, char* storage,
                          size_t storage_bytes);
int breadcrumb_ring_snapshot(const Crumb* crumbs, uint64_t next, BreadcrumbView* out, int cap,
                             char* storage, size_t storage_bytes);

// Where the tables are, for a reader outside the process: constant data the
// library exports as faultline_remote_tables. A reader accepts it only with
// this magic, version and every size and count equal to its own.
constexpr uint64_t kRemoteTablesMagic = 0x7365'6c62'6174'6c66ULL;  // "fltables"
constexpr uint32_t kRemoteTablesVersion = 1;

struct RemoteTables {
  uint64_t magic;
  uint32_t version;
  uint32_t size;  // sizeof(RemoteTables)
  uint32_t global_slot_size, thread_table_size, crumb_size;
  uint32_t key_bytes, value_bytes, thread_value_bytes, breadcrumb_bytes;
  int32_t max_annotations, max_thread_annotations, max_annotated_threads, max_breadcrumbs;
  const GlobalSlot* annotations;     // [max_annotations]
  const int* annotations_limit;      // slots in use
  const ThreadTable* thread_tables;  // [max_annotated_threads]
  const int* probe_limit;
  const Crumb* crumbs;  // [max_breadcrumbs]
  const uint64_t* crumb_next;
};

// This build's expected descriptor, addresses aside.
bool remote_tables_match(const RemoteTables& t);

}  // namespace faultline::core

extern "C" __attribute__((visibility("default")))
const faultline::core::RemoteTables faultline_remote_tables;
