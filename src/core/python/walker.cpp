// The CPython frame walker: capture_python() and python_init_exports().
//
// Crash path. No heap (the arena only), no locks, every pointer of the
// interpreter read through safe_read(); the thread and frame loops are
// bounded and detect cycles (Brent's algorithm: one saved address, no table).
#include "core/python/walker.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/safe_read.h"
#include "core/base/str.h"
#include "core/python/code.h"
#include "core/python/layouts.h"
#include "core/python/runtime.h"
#include "core/python/text.h"

namespace faultline::core {
namespace {

using python::code_info;
using python::CodeCache;
using python::CodeInfo;
using python::instr_offset;
using python::PyLayout;
using python::read_u64;
using python::Runtime;
using python::u64_in;

// Interpreters walked: subinterpreters are rare; 64 bounds a corrupt list.
constexpr int kMaxInterpreters = 64;
// Frames followed per thread (kept or not): deeper than the default
// recursion limit (1000) with room, bounded so a corrupt chain cannot spin.
constexpr int kMaxFramesWalked = 20000;
// Install-time state: zero-initialised POD, no constructor.
struct InstallState {
  bool have_runtime;
  Runtime runtime;
};
InstallState g_install;

// Where glibc's struct pthread keeps the kernel tid, found at first use
// (only interpreters without native_thread_id need it; at every start it
// cost a process_vm_readv, a gettid and a getpid). -1: not found yet (a
// failure is not kept: the next capture, maybe on a thread whose memory is
// intact, looks again). Two threads looking at once find the same answer.
long pthread_tid_offset() {
  static volatile long offset = -1;
  long v = __atomic_load_n(&offset, __ATOMIC_RELAXED);
  if (v < 0) {
    v = python::find_pthread_tid_offset();
    if (v >= 0) __atomic_store_n(&offset, v, __ATOMIC_RELAXED);
  }
  return v;
}

// Brent's cycle detection over a linked list: call step() with each node.
struct CycleGuard {
  uintptr_t saved;
  long power;
  long lambda;
  bool step(uintptr_t node) {
    if (node == saved) return false;
    if (++lambda == power) {
      saved = node;
      power *= 2;
      lambda = 0;
    }
    return true;
  }
};

struct Walk {
  const Runtime* rt;
  const PyLayout* l;
  Arena* arena;
  CaptureErrors* errors;
  CodeCache* cache;  // may be nullptr
};

// A per-thread error message, in the arena: "python: thread T: what at 0x..".
const char* thread_error(Arena* arena, uint64_t tid, const char* what, uintptr_t addr,
                         int frame_index) {
  char buf[256];
  StrBuf b(buf, sizeof buf);
  b.add("python: thread ").add_dec(static_cast<int64_t>(tid)).add(": ").add(what);
  if (addr) b.add(" at ").add_hex(addr);
  if (frame_index >= 0) b.add(" (frame ").add_dec(frame_index).add(")");
  const char* s = arena->dup(buf, b.len());
  return s ? s : "python: thread walk ended early (arena exhausted)";
}

// The first interpreter frame of a thread state.
bool first_frame(const PyLayout& l, uintptr_t tstate, uintptr_t* frame) {
  uint64_t v = 0;
  if (!read_u64(tstate + static_cast<uintptr_t>(l.ts_frame), &v)) return false;
  if (l.cframe_current_frame >= 0 && v != 0) {
    if (!read_u64(v + static_cast<uintptr_t>(l.cframe_current_frame), &v)) return false;
  }
  *frame = v;
  return true;
}

// 3.11: each eval call keeps its _PyCFrame on the C stack (a local of
// _PyEval_EvalFrameDefault) and links it to the caller's (cframe.previous);
// its current_frame is the innermost frame of the frames that call runs. The
// k-th cframe from tstate->cframe therefore belongs to the k-th run of the
// walked frames (innermost first): its address becomes that run's entry
// address, checked by its current_frame being the run's first frame. The
// chain ends at the thread state's root cframe (not on the stack), which
// runs no frames. Stops at the first mismatch, leaving the rest unmarked.
void mark_cframes(const PyLayout& l, uintptr_t tstate, PyThread* py) {
  if (l.cframe_previous < 0 || l.cframe_current_frame < 0 || l.fr_is_entry < 0) return;
  if (py->nframes != py->frames_total) return;
  uint64_t cframe = 0;
  if (!read_u64(tstate + static_cast<uintptr_t>(l.ts_frame), &cframe)) return;
  int first = 0;  // first frame of the current run
  for (int i = 0; i < py->nframes && cframe != 0; ++i) {
    if (!py->frames[i].entry) continue;
    uint64_t current = 0, previous = 0;
    if (!read_u64(cframe + static_cast<uintptr_t>(l.cframe_current_frame), &current) ||
        !read_u64(cframe + static_cast<uintptr_t>(l.cframe_previous), &previous) ||
        current != py->frames[first].frame_addr) {
      return;
    }
    py->frames[i].entry_shim = cframe;
    cframe = previous;
    first = i + 1;
  }
}

// Walks one thread's frames into py (frames innermost first).
// The part of an interpreter frame the walker reads (every field it uses
// lies in the first 128 bytes for 3.9-3.14).
constexpr int kFrameBufBytes = 128;

void walk_frames(Walk* w, uintptr_t tstate, PyThread* py, int max_frames) {
  const PyLayout& l = *w->l;
  uintptr_t frame = 0;
  if (!first_frame(l, tstate, &frame)) {
    py->error = thread_error(w->arena,
                             py->native_tid ? static_cast<uint64_t>(py->native_tid) : py->thread_id,
                             "thread state unreadable", tstate, -1);
    return;
  }
  int frame_bytes = l.fr_previous + 8;
  const int fields[] = {l.fr_code + 8, l.fr_instr + 8, l.fr_is_entry + 1, l.fr_owner + 1};
  for (int f : fields) {
    if (f > frame_bytes) frame_bytes = f;
  }
  if (frame_bytes > kFrameBufBytes) {
    // Offsets from the target's _Py_DebugOffsets beyond what we read.
    py->error = thread_error(w->arena,
                             py->native_tid ? static_cast<uint64_t>(py->native_tid) : py->thread_id,
                             "frame layout larger than expected", 0, -1);
    return;
  }
  CycleGuard guard = {0, 1, 0};
  for (int walked = 0; frame != 0; ++walked) {
    if (walked >= kMaxFramesWalked) {
      py->error = thread_error(
          w->arena, py->native_tid ? static_cast<uint64_t>(py->native_tid) : py->thread_id,
          "frame chain too long, cut", 0, walked);
      return;
    }
    if (!guard.step(frame)) {
      py->error = thread_error(
          w->arena, py->native_tid ? static_cast<uint64_t>(py->native_tid) : py->thread_id,
          "frame chain has a cycle", frame, walked);
      return;
    }
    uint8_t buf[kFrameBufBytes];
    if (!safe_read(buf, frame, static_cast<size_t>(frame_bytes))) {
      py->error = thread_error(
          w->arena, py->native_tid ? static_cast<uint64_t>(py->native_tid) : py->thread_id,
          "frame unreadable", frame, walked);
      return;
    }
    uintptr_t previous = u64_in(buf, l.fr_previous);
    if (l.fr_owner >= 0 && l.owner_first_shim >= 0) {
      int8_t owner = static_cast<int8_t>(buf[l.fr_owner]);
      if (owner >= l.owner_first_shim) {
        // Not a Python frame. The C-stack shim closes the frames one eval
        // call ran: the last frame kept before it is that call's entry.
        if (owner == l.owner_cstack && py->nframes > 0 && py->nframes == py->frames_total) {
          PyFrame& last = py->frames[py->nframes - 1];
          if (!last.entry) {
            last.entry = true;
            last.entry_shim = frame;
          }
        }
        frame = previous;
        continue;
      }
    }
    uintptr_t code = u64_in(buf, l.fr_code) & ~l.executable_tag_mask;
    ++py->frames_total;
    if (py->nframes < max_frames && py->frames) {
      const CodeInfo* c = code_info(*w->rt, *w->l, w->arena, w->cache, code);
      if (c->error) {
        --py->frames_total;
        py->error = thread_error(
            w->arena, py->native_tid ? static_cast<uint64_t>(py->native_tid) : py->thread_id,
            c->error, code, walked);
        return;
      }
      PyFrame& f = py->frames[py->nframes++];
      f.file = c->file;
      f.function = c->name;
      f.qualname = c->qualname;
      f.frame_addr = frame;
      f.line = c->table_len < 0 ? -1
                                : python::line_for_offset(l.lines, c->table, c->table_len,
                                                          c->firstlineno, instr_offset(l, buf, *c));
      if (l.fr_is_entry >= 0) {
        f.entry = buf[l.fr_is_entry] != 0;
      } else if (l.minor <= 10) {
        f.entry = true;  // one eval call per frame
      }
    }
    frame = previous;
  }
  mark_cframes(l, tstate, py);
}

// Where a thread's innermost run of Python frames entered the eval loop: an
// address on its C stack (the lower, the deeper); 0 where unknown (3.9/3.10,
// or no frames).
uintptr_t innermost_entry(const PyThread& t) {
  for (int i = 0; i < t.nframes; ++i) {
    if (t.frames[i].entry) return t.frames[i].entry_shim;
  }
  return 0;
}

// One native thread with a thread state in several interpreters (it called
// into a subinterpreter: concurrent.interpreters, _interpreters.exec): its
// Python stack is all of them, innermost first, and was only the first
// interpreter's (the subinterpreter's frames, without the caller's). Merged
// into one entry where every part is whole and the order is known from
// where each entered the eval loop on the C stack; otherwise left as they
// were (the first is the one shown).
void merge_interpreters(PythonCapture* out, Arena* arena) {
  // A thread state left out of the list (past max_threads) may be a part:
  // a merge without it would drop its frames in silence.
  if (out->threads_total > out->nthreads) return;
  constexpr int kMaxParts = 8;
  for (int i = 0; i < out->nthreads; ++i) {
    PyThread& first = out->threads[i];
    if (first.native_tid == 0) continue;
    int parts[kMaxParts];
    int nparts = 0, total = 0;
    bool whole = true;
    for (int k = i; k < out->nthreads; ++k) {
      const PyThread& t = out->threads[k];
      if (t.native_tid != first.native_tid) continue;
      if (nparts == kMaxParts) {  // more nested interpreters than kept: as they were
        whole = false;
        break;
      }
      parts[nparts++] = k;
      total += t.nframes;
      whole = whole && t.nframes == t.frames_total && !t.error &&
              (t.nframes == 0 || (innermost_entry(t) != 0 && t.frames[t.nframes - 1].entry));
    }
    if (nparts < 2 || !whole) continue;
    // Innermost first: by the C-stack address of each one's innermost entry.
    for (int a = 1; a < nparts; ++a) {
      for (int b = a; b > 0; --b) {
        const PyThread& x = out->threads[parts[b - 1]];
        const PyThread& y = out->threads[parts[b]];
        uintptr_t ex = innermost_entry(x), ey = innermost_entry(y);
        bool swap = (ex == 0 && ey != 0) || (ex != 0 && ey != 0 && ey < ex);
        if (!swap) break;
        int tmp = parts[b - 1];
        parts[b - 1] = parts[b];
        parts[b] = tmp;
      }
    }
    PyFrame* frames = total ? arena->alloc_array<PyFrame>(static_cast<size_t>(total)) : nullptr;
    if (total && !frames) continue;
    PyThread merged = out->threads[parts[0]];
    merged.frames = frames;
    merged.nframes = merged.frames_total = 0;
    for (int p = 0; p < nparts; ++p) {
      const PyThread& t = out->threads[parts[p]];
      for (int f = 0; f < t.nframes; ++f) merged.frames[merged.nframes++] = t.frames[f];
      merged.frames_total += t.frames_total;
      merged.holds_gil = merged.holds_gil || t.holds_gil;
    }
    // The merged entry where the first part was; the others leave the list.
    // Its frame count last, so a jump out of the phase (a fault, the
    // watchdog) in between leaves a count that fits its frames.
    PyThread& dst = out->threads[i];
    dst.nframes = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    dst.frames = merged.frames;
    dst.frames_total = merged.frames_total;
    dst.holds_gil = merged.holds_gil;
    dst.thread_id = merged.thread_id;
    dst.error = merged.error;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    dst.nframes = merged.nframes;
    int kept = i + 1;
    for (int k = i + 1; k < out->nthreads; ++k) {
      bool part = false;
      for (int p = 0; p < nparts; ++p) part = part || parts[p] == k;
      if (!part) out->threads[kept++] = out->threads[k];
    }
    out->nthreads = kept;
  }
}

// The thread state holding the GIL, 0 if none or unknown.
uintptr_t gil_holder(const Runtime& rt, uintptr_t interp) {
  const PyLayout& l = rt.layout;
  uintptr_t gil = 0;
  int locked_off, holder_off;
  if (l.rt_gil_locked >= 0) {
    gil = rt.address;
    locked_off = l.rt_gil_locked;
    holder_off = l.rt_gil_last_holder;
  } else if (l.is_ceval_gil >= 0 && l.gil_locked >= 0) {
    uint64_t p = 0;
    if (!read_u64(interp + static_cast<uintptr_t>(l.is_ceval_gil), &p)) return 0;
    gil = p;
    locked_off = l.gil_locked;
    holder_off = l.gil_last_holder;
  } else {
    return 0;
  }
  int32_t locked = 0;
  uint64_t holder = 0;
  if (!gil || !safe_read_obj(&locked, gil + static_cast<uintptr_t>(locked_off)) ||
      !read_u64(gil + static_cast<uintptr_t>(holder_off), &holder)) {
    return 0;
  }
  return locked ? holder : 0;
}

pid_t native_tid(const PyLayout& l, uintptr_t tstate, uint64_t thread_id) {
  if (l.ts_native_thread_id >= 0) {
    uint64_t t = 0;
    if (read_u64(tstate + static_cast<uintptr_t>(l.ts_native_thread_id), &t)) {
      return static_cast<pid_t>(t);
    }
    return 0;
  }
  int32_t t = 0;
  long offset = thread_id ? pthread_tid_offset() : -1;
  if (offset >= 0 && safe_read_obj(&t, thread_id + static_cast<uintptr_t>(offset))) return t;
  return 0;
}

}  // namespace

void python_init_exports(const PythonExports& e) {
  Runtime rt = {};
  if (python::runtime_from_exports(e, &rt) == nullptr) {
    g_install.runtime = rt;
    g_install.have_runtime = true;
  }
}

void capture_python(const ModuleTable& modules, Arena* arena, PythonCapture* out, int max_threads,
                    int max_frames, CaptureErrors* errors) {
  out->present = false;
  Runtime rt = {};
  bool cached = false;
  if (g_install.have_runtime) {
    // Trust the install-time answer only while its module is still mapped.
    for (int i = 0; i < modules.count; ++i) {
      if (modules.items[i].base == g_install.runtime.module_base) cached = true;
    }
    if (cached) rt = g_install.runtime;
  }
  if (!cached) {
    const char* why = python::locate_runtime(modules, &rt);
    if (why) {
      if (why != python::kNoRuntime) errors->add(why);
      return;
    }
  }
  out->present = true;
  str_copy(out->version, sizeof out->version, rt.version);
  out->hexversion = rt.hexversion;
  out->runtime = rt.address;
  out->found_at_install = cached;
  out->threads = arena->alloc_array<PyThread>(static_cast<size_t>(max_threads));
  if (!out->threads) {
    errors->add("python: arena exhausted before the thread list");
    return;
  }
  Walk w = {&rt, &rt.layout, arena, errors, python::code_cache_new(arena)};
  const PyLayout& l = rt.layout;

  uint64_t interp = 0;
  if (!read_u64(rt.address + static_cast<uintptr_t>(l.rt_interpreters_head), &interp)) {
    errors->add("python: _PyRuntime unreadable");
    return;
  }
  if (interp == 0) {
    errors->add("python: no interpreter (not initialised or finalised)");
    return;
  }
  CycleGuard interp_guard = {0, 1, 0};
  for (int n = 0; interp != 0 && n < kMaxInterpreters; ++n) {
    if (!interp_guard.step(interp)) {
      errors->add("python: interpreter list has a cycle");
      break;
    }
    uintptr_t holder = gil_holder(rt, interp);
    uint64_t ts = 0;
    if (!read_u64(interp + static_cast<uintptr_t>(l.is_tstate_head), &ts)) {
      errors->add("python: interpreter state unreadable");
      break;
    }
    CycleGuard ts_guard = {0, 1, 0};
    while (ts != 0) {
      if (!ts_guard.step(ts)) {
        errors->add("python: thread state list has a cycle");
        break;
      }
      ++out->threads_total;
      if (out->threads_total > 100000) break;  // corrupt list: stop counting
      if (out->nthreads < max_threads) {
        PyThread* py = &out->threads[out->nthreads++];
        uint64_t tid = 0;
        read_u64(ts + static_cast<uintptr_t>(l.ts_thread_id), &tid);
        py->thread_id = tid;
        py->native_tid = native_tid(l, ts, tid);
        py->holds_gil = holder != 0 && holder == ts;
        py->frames = arena->alloc_array<PyFrame>(static_cast<size_t>(max_frames));
        if (!py->frames) py->error = "python: arena exhausted, frames left out";
        walk_frames(&w, ts, py, max_frames);
      }
      uint64_t next = 0;
      if (!read_u64(ts + static_cast<uintptr_t>(l.ts_next), &next)) {
        errors->add("python: thread state list unreadable");
        break;
      }
      ts = next;
    }
    uint64_t next = 0;
    if (!read_u64(interp + static_cast<uintptr_t>(l.is_next), &next)) break;
    interp = next;
  }
  if (out->threads_total > out->nthreads) {
    errors->add("python: more threads than the report keeps");
  }
  merge_interpreters(out, arena);
}

}  // namespace faultline::core
