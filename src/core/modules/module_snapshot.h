// A snapshot of the loaded modules, made outside the signal path (at the
// first pthread_create and after each dlopen/dlclose), so the crash handler
// does not read ~200 modules' program headers and build-id notes at crash
// time.
//
// The snapshot is taken under the loader's lock (inside dl_iterate_phdr) and
// records the link-map node of every module. Two buffers: a refresh writes
// the one the handler is not reading and publishes it with an atomic store.
// At crash time the handler checks that the link map still has exactly the
// recorded nodes (one process_vm_readv of all of them, through the
// SafeReader's checks) and only then uses it; otherwise it walks the link map
// as before.
#pragma once

#include "core/base/arena.h"
#include "core/capture.h"
#include "core/modules/modules.h"
#include "core/unwind/cfi/engine.h"

namespace faultline::core {

// The snapshot is made at install time: src/install/module_snapshot_refresh.h.

// Crash time (async-signal-safe). When the snapshot is current, fills
// `table` (capacity preset; paths copied into the arena) and `cfi` (sorted,
// in the arena) and returns true. Otherwise returns false and leaves both
// for the crash-time walk. With `tail`, a snapshot that is a prefix of the
// link map (modules were loaded since: the last dlopen's) is used too, and
// *tail is the first link-map node after it (0: none), for the caller to
// read the rest (collect_modules from there, then cfi_modules_append).
bool module_snapshot_use(ModuleTable* table, CfiModules* cfi, Arena* arena,
                         uintptr_t* tail = nullptr);

// Crash time: adds the modules table.items[from..count) to the unwinder's
// sorted list (a new array in the arena; cfi's sparse indexes kept).
bool cfi_modules_append(const ModuleTable& table, int from, CfiModules* cfi, Arena* arena);

// Crash time: the unwinder's module list from a table read at crash time
// (reads each module's program headers for PT_GNU_EH_FRAME through the
// SafeReader). Async-signal-safe.
bool cfi_modules_from_table(const ModuleTable& table, CfiModules* cfi, Arena* arena);

// Crash time: if the published snapshot has the link-map node `node` with
// this bias, name pointer and dynamic section, copies its module into *out
// (its path and the unwinder's index copied into `arena` while the snapshot
// is read) and returns true. Async-signal-safe.
bool module_snapshot_known(uintptr_t node, uintptr_t l_addr, uintptr_t l_name, uintptr_t l_ld,
                           Module* out, Arena* arena);

// Crash time, when the phase that read the snapshot is over however it
// ended: releases any read of the calling thread that a fault or the
// watchdog cut short (a siglongjmp out of module_snapshot_use), so that later
// refreshes are not held back for good. Async-signal-safe.
void module_snapshot_end_reads();

// How many modules the published snapshot holds (tests, benchmarks).
int module_snapshot_count();

}  // namespace faultline::core
