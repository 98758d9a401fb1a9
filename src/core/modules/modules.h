// The loaded modules, found without the loader's lock: walk _r_debug's link
// map (never dl_iterate_phdr or dladdr, which take the loader lock), read each
// module's program headers and build-id note from its loaded image through the
// SafeReader. Async-signal-safe.
#pragma once

#include "core/base/arena.h"
#include "core/frames.h"

namespace faultline::core {

// Fills `table` (capacity preset) from the link map. Returns false if the
// link map could not be read at all. Modules the snapshot already knows
// (module_snapshot.h) are copied from it unless `reuse_snapshot` is false.
// With `from_node`, appends the modules of the link map from that node on
// to those already in `table`.
bool collect_modules(ModuleTable* table, Arena* arena, CaptureErrors* errors,
                     bool reuse_snapshot = true, uintptr_t from_node = 0);

// Index of the module containing pc, or -1.
int find_module(const ModuleTable& table, uintptr_t pc);

// Install-time: remembers where the executable's program headers are (from
// the auxiliary vector: no system call).
void modules_init();
// In a fork child: a path the parent was still reading is read again.
void modules_reset_after_fork();
// The main executable's path (the link map names it ""): /proc/self/exe, read
// at the first call (for a program started by running its loader, `ld.so
// prog`, the file mapped where the program is), else the path given to
// execve. Async-signal-safe.
const char* modules_exe_path();
// Opens the file to read a module's symbols and tables from: its path,
// except for the executable, read through /proc/self/exe (its path may
// hold another binary since a package upgrade) unless the program was
// started through its loader (then /proc/self/exe is the loader, and the
// program is opened as a library is). A library whose path now
// holds another file (its build-id differs from the loaded one's) or none
// is opened through /proc/self/map_files where the kernel allows it (root
// outside a container: CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE in the first
// namespace), else not at all; *replaced says when the path holds another
// build. -1 if it cannot be opened.
// Async-signal-safe.
int open_module_file(const Module& m, bool* replaced = nullptr);

}  // namespace faultline::core
