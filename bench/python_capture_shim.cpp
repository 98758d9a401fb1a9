// Benchmark shim: runs the crash path's Python capture (capture_python) in a
// live process, outside any signal handler, and times it. Linked by
// python_capture.py against the crash-path objects of a build
// (crash-objects.txt); loaded into the interpreter with ctypes.PyDLL.
#include <time.h>

#include "core/base/arena.h"
#include "core/base/safe_read.h"
#include "core/modules/modules.h"
#include "core/python/walker.h"

using namespace faultline::core;

namespace {
Arena g_arena;

long now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}
}  // namespace

// Times `iters` captures into ns[]; returns the frames captured by the last
// one (all threads), or -1 on setup failure.
extern "C" long fl_bench_python_capture(int iters, long* ns, int max_frames) {
  if (!g_arena.init(64u << 20)) return -1;
  safe_read_init();
  modules_init();
  python_init(nullptr);
  long frames = 0;
  for (int i = 0; i < iters; ++i) {
    g_arena.reset();
    ModuleTable table = {};
    table.capacity = 1024;
    table.items = g_arena.alloc_array<Module>(1024);
    CaptureErrors errors = {};
    collect_modules(&table, &g_arena, &errors);
    PythonCapture cap = {};
    long t0 = now_ns();
    capture_python(table, &g_arena, &cap, 512, max_frames, &errors);
    ns[i] = now_ns() - t0;
    frames = 0;
    for (int k = 0; k < cap.nthreads; ++k) frames += cap.threads[k].nframes;
  }
  return frames;
}
