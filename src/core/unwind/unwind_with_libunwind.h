// The libunwind backend: libunwind's local unwinder, loaded at run time only
// when FAULTLINE_UNWINDER chooses it (src/install/libunwind_load.cpp) and
// called through pointers. It finds unwind tables through dl_iterate_phdr,
// whose lock is recursive: if another thread holds it, the capture stalls
// until the watchdog's first stage.
#pragma once

#include <ucontext.h>

// The backend is built where its register handling is written for the
// architecture (x86-64) and libunwind's header is found; elsewhere
// libunwind_available() is false and FAULTLINE_UNWINDER=libunwind falls
// back to the CFI unwinder (doc/aarch64.md).
#if defined(__x86_64__) && __has_include(<libunwind.h>)
#define FAULTLINE_LIBUNWIND 1
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#else
#define FAULTLINE_LIBUNWIND 0
#endif

#include "core/frames.h"
#include "core/unwind/cfi/engine.h"

namespace faultline::core {

// libunwind's local-unwinding entry points. The library does not link
// libunwind: it is loaded (src/install/libunwind_load.cpp) only when
// FAULTLINE_UNWINDER asks for it, so a process that never uses it does not
// pay for loading it. Until then every pointer is null.
#if FAULTLINE_LIBUNWIND
struct LibunwindApi {
  int (*init_local)(unw_cursor_t*, unw_context_t*);
  int (*init_local2)(unw_cursor_t*, unw_context_t*, int);
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
  int (*is_signal_frame)(unw_cursor_t*);
  int (*step)(unw_cursor_t*);
  int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
  int (*getcontext)(unw_context_t*);
  unw_addr_space_t* local_addr_space;
};

// Install-time: use libunwind through `api` (every pointer set), with its
// caching policy set for use in a signal handler. per_thread_cache:
// libunwind's per-thread cache (its own TLS) is safe to touch in a handler,
// i.e. that TLS is static; else no cache is used.
void unwind_use_libunwind(const LibunwindApi& api, bool per_thread_cache);
#endif

// Whether libunwind was loaded (unwind_use_libunwind ran).
bool libunwind_available();

// libunwind from the interrupted context, or (regs set) from the frame the
// CFI unwinder stopped at, already recorded (exact: that frame's pc is the
// instruction itself, not a return address). Where it stops early the
// frame-pointer chain goes on.
void unwind_with_libunwind(const ucontext_t* uc, const CfiRegs* regs, bool exact,
                           const ModuleTable& modules, ThreadCapture* t, int max_frames,
                           CaptureErrors* errors);

}  // namespace faultline::core
