#include "core/unwind.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "core/safe_read.h"

namespace faultline::core {
namespace {

// Beyond this many frames we stop counting (a runaway recursion of a million
// frames is reported as "at least 10000").
constexpr int kMaxCountedFrames = 10000;

void push_frame(ThreadCapture* t, int max_frames, uintptr_t pc, uintptr_t sp, bool signal_frame) {
  if (t->nframes < max_frames) {
    NativeFrame& f = t->frames[t->nframes++];
    f.pc = pc;
    f.sp = sp;
    f.module = -1;
    f.symbol = nullptr;
    f.signal_frame = signal_frame;
  }
  ++t->frames_total;
}

bool pc_is_code(const ModuleTable& modules, uintptr_t pc) {
  // Code outside every module (JIT, Triton kernels' loaded cubins are not
  // CPU code) still counts as code if it is readable; a pc that cannot even
  // be read is the mark of a call through a bad pointer.
  if (find_module(modules, pc) >= 0) return true;
  char byte;
  return safe_read(&byte, pc, 1);
}

// Returns: 1 finished at the outermost frame, 0 stopped by the frame cap,
// -1 stopped by an error (caller falls back to frame pointers).
int walk_libunwind(unw_context_t* ctx, bool signal_frame, ThreadCapture* t, int max_frames,
                   uintptr_t* last_fp) {
  unw_cursor_t cursor;
  if (unw_init_local2(&cursor, ctx, signal_frame ? UNW_INIT_SIGNAL_FRAME : 0) < 0) return -1;
  // A frame's pc is exact (not a return address) for the interrupted frame
  // we start from and for the frame below a signal trampoline; libunwind
  // flags the trampoline itself, so the flag carries over one frame.
  bool exact = signal_frame;
  while (t->frames_total < kMaxCountedFrames) {
    unw_word_t ip = 0, sp = 0, fp = 0;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    unw_get_reg(&cursor, UNW_REG_SP, &sp);
    unw_get_reg(&cursor, UNW_X86_64_RBP, &fp);
    if (ip == 0) return 1;
    push_frame(t, max_frames, ip, sp, exact);
    exact = unw_is_signal_frame(&cursor) > 0;
    *last_fp = fp;
    int r = unw_step(&cursor);
    if (r == 0) return 1;
    if (r < 0) return -1;
  }
  return 0;
}

}  // namespace

void unwind_init(bool per_thread_cache) {
  // A global cache takes a lock; the per-thread cache is signal-safe per
  // libunwind's documentation when its TLS is static (loaded at start-up).
  // Loaded late, libunwind's TLS is dynamic: a thread's first touch would
  // call malloc inside the handler, so no cache then (slower, but safe).
  // Warm up so the first use at crash time does not initialise anything
  // lazily.
  unw_set_caching_policy(unw_local_addr_space,
                         per_thread_cache ? UNW_CACHE_PER_THREAD : UNW_CACHE_NONE);
  unw_context_t ctx;
  unw_getcontext(&ctx);
  unw_cursor_t cursor;
  if (unw_init_local(&cursor, &ctx) == 0) {
    for (int i = 0; i < 4 && unw_step(&cursor) > 0; ++i) {
    }
  }
}

void unwind_frame_pointers(uintptr_t fp, ThreadCapture* t, int max_frames) {
  // The classic chain: [fp] = caller's fp, [fp+8] = return address. Stop at
  // anything that is not a plausible, growing, aligned stack address.
  while (fp && (fp & 7) == 0 && t->frames_total < kMaxCountedFrames) {
    uintptr_t pair[2];
    if (!safe_read(pair, fp, sizeof pair)) break;
    if (pair[1] == 0) break;
    push_frame(t, max_frames, pair[1], fp + 16, false);
    if (pair[0] <= fp) break;
    fp = pair[0];
  }
}

void unwind_from_context(const ucontext_t* uc, const ModuleTable& modules, ThreadCapture* t,
                         int max_frames, CaptureErrors* errors) {
  t->nframes = 0;
  t->frames_total = 0;
  t->unwinder = Unwinder::kLibunwind;
  uintptr_t pc = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  uintptr_t sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  uintptr_t fp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RBP]);

  // unw_context_t is a ucontext_t on x86-64; copy it so libunwind may not
  // write into the kernel's signal frame.
  unw_context_t ctx;
  const char* src = reinterpret_cast<const char*>(uc);
  char* dst = reinterpret_cast<char*>(&ctx);
  for (size_t i = 0; i < sizeof ctx && i < sizeof *uc; ++i) dst[i] = src[i];

  int result;
  uintptr_t last_fp = fp;
  if (!pc_is_code(modules, pc)) {
    // A call through a bad pointer: the return address is on top of the
    // stack. Record the bad pc, then unwind from the caller.
    push_frame(t, max_frames, pc, sp, true);
    uintptr_t ret = 0;
    if (!safe_read_obj(&ret, sp)) {
      errors->add("unwind: pc is not code and the stack top is unreadable");
      t->unwinder = Unwinder::kNone;
      return;
    }
    ucontext_t* c = reinterpret_cast<ucontext_t*>(&ctx);
    c->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(ret);
    c->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(sp + 8);
    result = walk_libunwind(&ctx, false, t, max_frames, &last_fp);
  } else {
    result = walk_libunwind(&ctx, true, t, max_frames, &last_fp);
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
  t->captured = true;
}

}  // namespace faultline::core
