#include "core/unwind/unwind_with_libunwind.h"

#include "core/base/safe_read.h"
#include "core/unwind/unwind.h"
#include "core/unwind/unwind_with_cfi.h"
#include "core/unwind/unwind_with_frame_pointers.h"

namespace faultline::core {

#if FAULTLINE_LIBUNWIND
namespace {

// libunwind's functions once loaded: filled before it is published, then
// never written again (a later install that loads it again finds it set).
LibunwindApi g_unw_storage = {};
const LibunwindApi* g_unw_published = nullptr;  // atomic; null: not loaded

const LibunwindApi* unw() {
  return __atomic_load_n(&g_unw_published, __ATOMIC_ACQUIRE);
}

// Whether the first frame can be unwound from its own tables. Code outside
// every module (JIT, Triton kernels' loaded cubins are not CPU code) counts
// if it is readable; a pc that cannot even be read is the mark of a call
// through a bad pointer. A pc in a module whose tables do not cover it (a
// library built without unwind tables) is not: libunwind would guess a
// frame-pointer frame there and read garbage.
bool pc_has_unwind_info(const ModuleTable& modules, uintptr_t pc) {
  const CfiModules& cfi = unwind_cfi_modules();
  if (cfi.count > 0) {
    CfiStatus st = cfi_lookup(cfi, pc);
    if (st == CfiStatus::kNoTable || st == CfiStatus::kNoFde) return false;
    if (st != CfiStatus::kNoModule) return true;
  } else if (find_module(modules, pc) >= 0) {
    return true;
  }
  char byte;
  return safe_read(&byte, pc, 1);
}

// Whether ret can be a return address: in a module, right after a call.
bool plausible_return(const ModuleTable& modules, uintptr_t ret) {
  const CfiModules& cfi = unwind_cfi_modules();
  bool in_module =
      cfi.count > 0 ? cfi_find_module(cfi, ret - 1) >= 0 : find_module(modules, ret - 1) >= 0;
  return in_module && cfi_follows_call(ret);
}

// Returns: 1 finished at the outermost frame, 0 stopped by the frame cap,
// -1 stopped by an error (caller falls back to frame pointers).
int walk_libunwind(unw_context_t* ctx, bool signal_frame, ThreadCapture* t, int max_frames,
                   uintptr_t* last_fp) {
  const LibunwindApi* u = unw();
  if (!u) return -1;
  unw_cursor_t cursor;
  if (u->init_local2(&cursor, ctx, signal_frame ? UNW_INIT_SIGNAL_FRAME : 0) < 0) return -1;
  // A frame's pc is exact (not a return address) for the interrupted frame
  // we start from and for the frame below a signal trampoline; libunwind
  // flags the trampoline itself, so the flag carries over one frame.
  bool exact = signal_frame;
  while (t->frames_total < kMaxCountedFrames) {
    unw_word_t ip = 0, sp = 0, fp = 0;
    u->get_reg(&cursor, UNW_REG_IP, &ip);
    u->get_reg(&cursor, UNW_REG_SP, &sp);
    u->get_reg(&cursor, UNW_X86_64_RBP, &fp);
    if (ip == 0) return 1;
    push_frame(t, max_frames, ip, sp, exact);
    exact = u->is_signal_frame(&cursor) > 0;
    *last_fp = fp;
    int r = u->step(&cursor);
    if (r == 0) return 1;
    if (r < 0) return -1;
  }
  return 0;
}

}  // namespace

void unwind_use_libunwind(const LibunwindApi& api, bool per_thread_cache) {
  if (unw()) return;  // loaded by an earlier install
  // A global cache takes a lock; the per-thread cache is signal-safe per
  // libunwind's documentation when its TLS is static (the program linked
  // libunwind itself). Loaded by faultline, after start, its TLS is
  // dynamic: a thread's first touch would call malloc inside the handler,
  // so no cache then (slower, but safe). Warm up so the first use at crash
  // time does not initialise anything lazily: one step does it. Published
  // only then, all at once.
  api.set_caching_policy(*api.local_addr_space,
                         per_thread_cache ? UNW_CACHE_PER_THREAD : UNW_CACHE_NONE);
  unw_context_t ctx;
  api.getcontext(&ctx);
  unw_cursor_t cursor;
  if (api.init_local(&cursor, &ctx) == 0) api.step(&cursor);
  g_unw_storage = api;
  __atomic_store_n(&g_unw_published, &g_unw_storage, __ATOMIC_RELEASE);
}

bool libunwind_available() {
  return unw() != nullptr;
}

// libunwind from the interrupted context, or (regs set) from the frame the
// CFI unwinder stopped at, already recorded. Out of line: its context copy
// stays off the stack of the CFI path, which may run on a small signal
// stack.
__attribute__((noinline)) void unwind_with_libunwind(const ucontext_t* uc, const CfiRegs* regs,
                                                     bool exact, const ModuleTable& modules,
                                                     ThreadCapture* t, int max_frames,
                                                     CaptureErrors* errors) {
  // unw_context_t is a ucontext_t on x86-64; copy it so libunwind may not
  // write into the kernel's signal frame.
  unw_context_t ctx;
  const char* src = reinterpret_cast<const char*>(uc);
  char* dst = reinterpret_cast<char*>(&ctx);
  for (size_t i = 0; i < sizeof ctx && i < sizeof *uc; ++i) dst[i] = src[i];
  ucontext_t* c = reinterpret_cast<ucontext_t*>(&ctx);
  if (regs) {
    // It records the CFI unwinder's last frame again.
    cfi_regs_to_ucontext(*regs, c);
    --t->frames_total;
    if (t->nframes > t->frames_total) t->nframes = t->frames_total;
  }
  uintptr_t pc = static_cast<uintptr_t>(c->uc_mcontext.gregs[REG_RIP]);
  uintptr_t sp = static_cast<uintptr_t>(c->uc_mcontext.gregs[REG_RSP]);
  uintptr_t last_fp = static_cast<uintptr_t>(c->uc_mcontext.gregs[REG_RBP]);
  int result;
  uintptr_t ret = 0;
  if (!regs && !pc_has_unwind_info(modules, pc) &&
      (!safe_read_obj(&ret, sp) || plausible_return(modules, ret))) {
    // A call through a bad pointer, or a first pc without unwind tables:
    // the return address is on top of the stack. Record the pc, then
    // unwind from the caller. (Not when the stack top is no return address:
    // a function without tables stopped past its prologue; libunwind's
    // guess does better there.)
    push_frame(t, max_frames, pc, sp, true);
    if (!ret) {
      errors->add("unwind: pc is not code and the stack top is unreadable");
      t->unwinder = Unwinder::kNone;
      return;
    }
    c->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(ret);
    c->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(sp + 8);
    result = walk_libunwind(&ctx, false, t, max_frames, &last_fp);
  } else {
    result = walk_libunwind(&ctx, exact, t, max_frames, &last_fp);
  }
  if (result < 0) {
    if (t->nframes == 0) push_frame(t, max_frames, pc, sp, true);
    int before = t->frames_total;
    unwind_frame_pointers(last_fp, t, max_frames);
    if (t->frames_total > before) {
      t->unwinder = Unwinder::kLibunwindThenFp;
      errors->add("unwind: libunwind stopped early; continued with the frame-pointer chain");
    } else {
      errors->add("unwind: libunwind stopped early and no frame-pointer chain was found");
    }
  }
}

#else  // no libunwind backend on this architecture

bool libunwind_available() {
  return false;
}

void unwind_with_libunwind(const ucontext_t*, const CfiRegs*, bool, const ModuleTable&,
                           ThreadCapture*, int, CaptureErrors*) {}

#endif

}  // namespace faultline::core
