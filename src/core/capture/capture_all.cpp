#include "core/capture/capture_all.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/base/safe_read.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/capture/annotations.h"
#include "core/capture/reraise.h"
#include "core/capture/run_phase.h"
#include "core/capture/task_files.h"
#include "core/capture/threads.h"
#include "core/crash_state.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/diagnosis.h"
#include "core/handler_state.h"
#include "core/minidump/minidump_file.h"
#include "core/modules/elf_symbols.h"
#include "core/modules/module_snapshot.h"
#include "core/python/walker.h"
#include "core/unwind/unwind.h"
#include "core/unwind/unwind_with_cfi.h"
#include "core/unwind/unwind_with_libunwind.h"
#include "core/write/report_file.h"

namespace faultline::core {
namespace {

// The spares are the two ends of a pipe faultline made and a duplicate of
// one: a file no one else can open, so a number that still names that pipe
// is ours (the program may have closed a spare and reused its number, even
// for a duplicate of its own files).
void release_reserved_fds() {
  for (int i = 0; i < kReservedFds; ++i) {
    int fd = __atomic_exchange_n(&g_crash.reserved_fd[i], -1, __ATOMIC_ACQ_REL);
    // Only if the number is still ours: never close the program's file.
    if (fd >= 0 && fd_still(fd, g_crash.reserved_id[i])) close(fd);
  }
}

void capture_annotations(Capture* c, Arena* arena) {
  constexpr size_t kStorage = kMaxAnnotations * (kAnnotationKeyBytes + kAnnotationValueBytes);
  char* storage = static_cast<char*>(arena->alloc(kStorage, 1));
  c->annotations = arena->alloc_array<AnnotationView>(kMaxAnnotations);
  if (storage && c->annotations) {
    c->nannotations = annotations_snapshot(c->annotations, kMaxAnnotations, storage, kStorage);
  }
  constexpr size_t kThreadStorage =
      kMaxThreadAnnotations * (kAnnotationKeyBytes + kThreadValueBytes);
  storage = static_cast<char*>(arena->alloc(kThreadStorage, 1));
  c->thread_annotations = arena->alloc_array<AnnotationView>(kMaxThreadAnnotations);
  if (storage && c->thread_annotations) {
    c->nthread_annotations = thread_annotations_snapshot(
        c->thread_annotations, kMaxThreadAnnotations, storage, kThreadStorage);
  }
  constexpr size_t kCrumbStorage = kMaxBreadcrumbs * kBreadcrumbBytes;
  storage = static_cast<char*>(arena->alloc(kCrumbStorage, 1));
  c->breadcrumbs = arena->alloc_array<BreadcrumbView>(kMaxBreadcrumbs);
  if (storage && c->breadcrumbs) {
    c->nbreadcrumbs = breadcrumbs_snapshot(c->breadcrumbs, kMaxBreadcrumbs, storage, kCrumbStorage);
  }
}

// Gives every native frame its origin. Frames of one function share one
// symbol string (the symbolizer's name cache), so a small cache keyed by
// (module, symbol) classifies a thousand-frame capture with a few dozen
// table walks.
void classify_frames(Capture* c) {
  struct Entry {
    int module;
    const char* symbol;
    const Origin* origin;
  };
  constexpr int kSlots = 512;
  static Entry cache[kSlots];  // static: the signal stack may be small
  for (Entry& e : cache) e = {-2, nullptr, nullptr};
  for (int t = 0; t < c->nthreads; ++t) {
    ThreadCapture& th = c->threads[t];
    for (int i = 0; i < th.nframes; ++i) {
      NativeFrame& f = th.frames[i];
      uintptr_t key =
          reinterpret_cast<uintptr_t>(f.symbol) ^ (static_cast<uintptr_t>(f.module) << 4);
      Entry& e = cache[(key >> 3) % kSlots];
      if (e.module == f.module && e.symbol == f.symbol && e.origin) {
        f.origin = e.origin;
        continue;
      }
      f.origin =
          &classify_native(f.module >= 0 ? c->modules.items[f.module].path : nullptr, f.symbol);
      e = {f.module, f.symbol, f.origin};
    }
  }
}

void assign_modules(const Capture& c, ThreadCapture* t) {
  for (int i = 0; i < t->nframes; ++i)
    t->frames[i].module = find_module(c.modules, t->frames[i].pc);
}

}  // namespace

const char* capture_kind_name(CaptureKind k) {
  switch (k) {
    case CaptureKind::kTerminate:
      return "terminate";
    case CaptureKind::kDump:
      return "dump";
    case CaptureKind::kShutdown:
      return "shutdown";
    case CaptureKind::kException:
      return "exception";
    case CaptureKind::kCrash:
      break;
  }
  return "crash";
}

void reserve_fds() {
  for (int i = 0; i < kReservedFds; ++i) {
    if (__atomic_load_n(&g_crash.reserved_fd[i], __ATOMIC_ACQUIRE) >= 0) return;  // still held
  }
  // A pipe: two descriptors in one system call, and an inode no other
  // process or file shares (see release_reserved_fds); the third spare
  // duplicates its read end.
  int fds[kReservedFds];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  fds[2] = fcntl(fds[0], F_DUPFD_CLOEXEC, 0);
  FdIdentity id = fd_identity(fds[0]);
  for (int i = 0; i < kReservedFds; ++i) {
    int none = -1;
    if (fds[i] < 0) continue;
    g_crash.reserved_id[i] = id;
    if (!__atomic_compare_exchange_n(&g_crash.reserved_fd[i], &none, fds[i], false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      close(fds[i]);
    }
  }
}

Capture* begin_capture() {
  // Frees the descriptors reserved at install: a process that ran out of
  // them can still read symbol tables and write its report.
  release_reserved_fds();
  safe_read_new_capture();
  safe_read_check_fds();
  g_crash.arena.reset();
  Capture* c = static_cast<Capture*>(g_crash.arena.alloc(sizeof(Capture), alignof(Capture)));
  g_crash.capture = c;
  // From the claim of the crash (handler.cpp), where there was one.
  if (c) c->start_ns = g_handler.claimed_ns ? g_handler.claimed_ns : monotonic_ns();
  return c;
}

namespace {

// The other threads, listed with c->own_thread_only as their note, their
// name and /proc state, and no native frames: nothing is sent to them.
void list_unasked_threads(Capture* c) {
  c->threads_total = 1;
  int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  c->nthreads = list_threads(dir, c->tid, c->threads, kMaxThreads, &c->threads_total);
  close(dir);
  for (int i = 1; i < c->nthreads; ++i) {
    ThreadCapture* t = &c->threads[i];
    t->note = c->own_thread_only;
    read_thread_name(t->tid, t->name, sizeof t->name);
    t->proc_state = read_thread_state(t->tid);
  }
}

}  // namespace

void capture_all(Capture* c, CaptureKind kind, int signo, siginfo_t* info, void* ucv) {
  Arena* arena = &g_crash.arena;
  const Config& cfg = g_crash.config;
  c->kind = kind;
  c->signo = signo;
  c->info = *info;
  if (ucv) {
    c->uc = *static_cast<ucontext_t*>(ucv);
    c->have_uc = true;
  }
  c->pid = sys_getpid();
  c->tid = sys_gettid();
  // One getpid for every read of the capture, not one per read. It stays
  // pinned to this process afterwards (a fork child unpins it).
  safe_read_pin_pid(c->pid);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  c->time_sec = ts.tv_sec;
  c->time_nsec = ts.tv_nsec;

  c->modules.capacity = kMaxModules;
  c->modules.items = arena->alloc_array<Module>(kMaxModules);
  c->threads = arena->alloc_array<ThreadCapture>(kMaxThreads);
  if (!c->modules.items || !c->threads) {
    c->errors.add("arena: too small for the module table");
    return;
  }
  // The snapshot made outside the signal path when it is still current,
  // else the link map read now. Either way, the CFI unwinder's module list;
  // none if the phase is skipped or faults (the previous capture's list was
  // in the arena just reset).
  unwind_cfi_set_modules(CfiModules{nullptr, 0});
  run_phase(Phase::kModules, c, [&] {
    CfiModules cfi = {nullptr, 0};
    uintptr_t tail = 0;
    c->modules_from_snapshot = module_snapshot_use(&c->modules, &cfi, arena, &tail);
    if (!c->modules_from_snapshot) {
      collect_modules(&c->modules, arena, &c->errors);
      cfi_modules_from_table(c->modules, &cfi, arena);
    } else if (tail) {
      // The snapshot, then what the last dlopen added (a Python job's last
      // import): only those are read now. The snapshot's list is published
      // first: a walk cut short still leaves it.
      unwind_cfi_set_modules(cfi);
      c->modules_tail_walked = true;
      int from = c->modules.count;
      collect_modules(&c->modules, arena, &c->errors, /*reuse_snapshot=*/false, tail);
      if (!cfi_modules_append(c->modules, from, &cfi, arena))
        c->errors.add("modules: arena short; the modules loaded last have no unwind tables");
    }
    unwind_cfi_set_modules(cfi);
  });
  module_snapshot_end_reads();  // a read the phase's fault or watchdog abandoned

  ThreadCapture* t = &c->threads[0];
  c->nthreads = 1;
  t->tid = c->tid;
  t->crashed = kind != CaptureKind::kDump;
  prctl(PR_GET_NAME, t->name, 0, 0, 0);
  t->frames = arena->alloc_array<NativeFrame>(static_cast<size_t>(cfg.max_frames));
  auto unwind_own = [&] {
    if (t->frames && c->have_uc) {
      run_phase(Phase::kUnwind, c,
                [&] { unwind_from_context(&c->uc, c->modules, t, cfg.max_frames, &c->errors); });
      assign_modules(*c, t);
      t->captured = t->nframes > 0;
    }
  };
  // The other threads are asked first and answer while this one unwinds
  // its own stack, walks the Python threads and reads the crash keys: on a
  // two-thread job the owner had nothing to do while it waited. Its own
  // unwind first where libunwind is loaded: it takes the loader's lock,
  // which a thread parked in dlopen would hold until released.
  const bool own_first = libunwind_available();
  if (own_first) unwind_own();
  if (c->own_thread_only)
    run_phase(Phase::kThreads, c, [&] { list_unasked_threads(c); });
  else
    run_phase(Phase::kThreads, c, [&] {
      c->nthreads =
          ask_other_threads(c->threads, kMaxThreads, cfg.max_threads, cfg.max_frames, c->modules,
                            arena, &c->threads_total, &c->threads_cut, &c->errors);
    });
  if (!own_first) unwind_own();
  run_phase(Phase::kPython, c, [&] {
    capture_python(c->modules, arena, &c->python, kMaxThreads, cfg.max_frames, &c->errors);
  });
  run_phase(Phase::kAnnotations, c, [&] { capture_annotations(c, arena); });
  // Cut short (the watchdog's first stage jumps out of the wait, or a
  // fault): once more, without waiting, so the answers that came are kept
  // and the rest noted.
  volatile bool collected = c->own_thread_only != nullptr;
  for (int attempt = 0; attempt < 2 && !collected; ++attempt) {
    run_phase(Phase::kThreadsCollect, c, [&] {
      c->nthreads = collect_other_threads(c->threads, cfg.thread_timeout_ms, c->modules,
                                          &c->threads_park_ns, &c->errors);
      collected = true;
    });
  }
  // If the watchdog cut the threads phase short, no request may stay open.
  threads_abort_capture();
  for (int k = 1; k < c->nthreads; ++k) assign_modules(*c, &c->threads[k]);
  run_phase(Phase::kSymbols, c,
            [&] { symbolize_threads(c->modules, c->threads, c->nthreads, arena, &c->errors); });
  run_phase(Phase::kClassify, c, [&] { classify_frames(c); });
  // Before anything reads the signal (the minidump, the diagnosis, the
  // writers): under a handler's re-raise, the original fault is what every
  // one of them describes.
  run_phase(Phase::kReraise, c, [&] { recover_reraised_fault(c); });
  if (cfg.callback) {
    run_phase(Phase::kCallback, c, [&] {
      CallbackWriter w = {arena, arena->alloc_array<AnnotationView>(CallbackWriter::kMax), 0};
      if (!w.items) return;
      cfg.callback(reinterpret_cast<faultline_callback_writer*>(&w), cfg.callback_data);
      c->callback_items = w.items;
      c->ncallback_items = w.count;
    });
  }
  // Last of the slow phases: whatever happens to it, the report is whole.
  if (cfg.minidump && !capture_is_live(kind)) {
    {
      // Here, not inside the phase: a phase abandoned by a fault or the
      // watchdog jumps out of it, past any destructor, and a process that
      // goes on (its handler recovered) must get its SIGXFSZ back.
      IgnoreFileSizeSignal no_sigxfsz;
      run_phase(Phase::kMinidump, c, [&] { write_minidump_file(c); });
    }
    end_minidump_phase(c);  // abandoned half-written: no temporary left
  }
  run_phase(Phase::kDiagnosis, c, [&] { diagnose(c); });
}

}  // namespace faultline::core
