// Merging a thread's native and Python frames in call order.
//
// Each native _PyEval_EvalFrameDefault frame ran a run of Python frames: in
// 3.9/3.10 exactly one, in 3.11+ every frame up to and including the one
// marked as that call's entry (is_entry in 3.11; the frame before the C-stack
// shim in 3.12+). Innermost first, the merged stack is: native frames down to
// the first eval frame, that eval frame's Python run, the eval frame itself,
// and so on. The merge is proven when the runs and the eval frames pair up
// one to one and, where the walker found the address each eval call keeps
// on the C stack (the shim frame in 3.12+, the _PyCFrame in 3.11: the
// run's entry_shim), each lies inside the stack frame of the eval frame it
// is paired with.
//
// Where the eval loop has no symbol (an interpreter without .symtab whose
// eval loop is split into hot and cold parts: its frames are module+offset
// outside the exported range), those addresses still say which native frame
// ran each run: each run goes before the native frame whose stack range
// holds its entry_shim; the runs' frames must follow each other inward to
// outward. Otherwise -1: the report keeps both lists.
#include "core/python/interleave.h"

#include "core/base/str.h"

namespace faultline::core {
namespace {

bool is_eval_frame(const NativeFrame& f) {
  const char* s = f.symbol;
  if (!s) return false;
  // GCC may split the function into ".cold" and other clones.
  return str_eq(s, "_PyEval_EvalFrameDefault") || str_starts_with(s, "_PyEval_EvalFrameDefault.");
}

// The native frame whose stack range [sp, caller's sp) holds addr, from
// index `from` on; -1 if none.
int frame_holding(const ThreadCapture& native, uintptr_t addr, int from) {
  for (int i = from; i + 1 < native.nframes; ++i) {
    uintptr_t lo = native.frames[i].sp, hi = native.frames[i + 1].sp;
    if (lo && addr >= lo && addr < hi) return i;
  }
  return -1;
}

// The merge by entry_shim addresses alone (3.11+); -1 when a run has none or it
// lies in no native frame after the previous run's.
int interleave_by_shim(const ThreadCapture& native, const PyThread& py, FrameRef* out, int cap) {
  int n = 0, next_py = 0, next_native = 0;
  while (next_py < py.nframes) {
    int end = next_py;  // the run's last (entry) frame
    while (!py.frames[end].entry) ++end;
    uintptr_t shim = py.frames[end].entry_shim;
    if (!shim) return -1;
    int eval = frame_holding(native, shim, next_native);
    if (eval < 0) return -1;
    for (; next_native < eval; ++next_native) {
      if (n >= cap) return -1;
      out[n++] = FrameRef{false, next_native};
    }
    for (; next_py <= end; ++next_py) {
      if (n >= cap) return -1;
      out[n++] = FrameRef{true, next_py};
    }
    if (n >= cap) return -1;
    out[n++] = FrameRef{false, next_native++};
  }
  for (; next_native < native.nframes; ++next_native) {
    if (n >= cap) return -1;
    out[n++] = FrameRef{false, next_native};
  }
  return n;
}

int interleave_by_symbol(const ThreadCapture& native, const PyThread& py, FrameRef* out, int cap) {
  int evals = 0;
  for (int i = 0; i < native.nframes; ++i) evals += is_eval_frame(native.frames[i]);
  int runs = 0;
  for (int i = 0; i < py.nframes; ++i) runs += py.frames[i].entry;
  if (runs != evals || native.nframes != native.frames_total) return -1;

  int n = 0, next_py = 0;
  for (int i = 0; i < native.nframes; ++i) {
    const NativeFrame& nf = native.frames[i];
    if (is_eval_frame(nf)) {
      while (next_py < py.nframes) {
        if (n >= cap) return -1;
        out[n++] = FrameRef{true, next_py};
        if (py.frames[next_py++].entry) break;
      }
      // The shim frame the run ended at lives in this eval frame's stack
      // frame: between its sp and its caller's.
      const PyFrame& entry = py.frames[next_py - 1];
      if (entry.entry_shim && nf.sp && i + 1 < native.nframes) {
        uintptr_t lo = nf.sp, hi = native.frames[i + 1].sp;
        if (!(entry.entry_shim >= lo && entry.entry_shim < hi)) return -1;
      }
    }
    if (n >= cap) return -1;
    out[n++] = FrameRef{false, i};
  }
  return next_py == py.nframes ? n : -1;
}

}  // namespace

int interleave_frames(const ThreadCapture& native, const PyThread& py, const ModuleTable&,
                      FrameRef* out, int cap) {
  if (py.nframes <= 0 || native.nframes <= 0) return -1;
  // The Python frames must be complete: with the outer runs cut off, the
  // pairing cannot be checked.
  if (py.nframes != py.frames_total) return -1;
  if (!py.frames[py.nframes - 1].entry) return -1;  // outermost run never closed
  int merged = interleave_by_symbol(native, py, out, cap);
  return merged >= 0 ? merged : interleave_by_shim(native, py, out, cap);
}

}  // namespace faultline::core
