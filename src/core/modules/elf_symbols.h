// ElfSymbolizer: names native frames from a module's .symtab and .dynsym,
// read with pread(2) from the module's file (or, for the vDSO, which has no
// file, from its loaded image through the SafeReader). The model is abseil's
// symbolize_elf: no dladdr (loader lock), no heap, one pass over each symbol
// table per module however many frames fall in it.
//
// Async-signal-safe: open/pread/close, stack buffers and the arena.
#pragma once

#include "core/base/arena.h"
#include "core/frames.h"
#include "core/modules/modules.h"

namespace faultline::core {

// Sets symbol/symbol_offset of each frame in `frames` (all in `module`).
// Returns false if the module's symbol tables could not be read (the reason is
// added to `errors` once per module).
bool symbolize_module_frames(const Module& module, NativeFrame** frames, int n, Arena* arena,
                             CaptureErrors* errors);

// Symbolizes every frame of every thread, grouping frames by module.
void symbolize_threads(const ModuleTable& modules, ThreadCapture* threads, int nthreads,
                       Arena* arena, CaptureErrors* errors);

}  // namespace faultline::core
