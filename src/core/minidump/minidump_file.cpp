#include "core/minidump/minidump_file.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "core/base/str.h"
#include "core/capture.h"
#include "core/crash_state.h"
#include "core/minidump/minidump.h"
#include "core/minidump/minidump_arch.h"
#include "core/phase.h"
#include "core/write/report_file.h"
#include "core/write/scrub.h"

namespace faultline::core {
namespace {

// The temporary file being written. Only the crash owner writes it; the
// watchdog's stand-in may remove it while the owner is stuck, so who
// discards it is settled by one exchange on g_pending.
ReportTemp g_temp = {-1, -1, "", 0, 0, false, false};
std::atomic<bool> g_pending{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the crash path uses lock-free atomics only");

MinidumpThread g_threads[kMaxThreads];
ArchThreadRegs g_crash_regs;
// The command line as the report gives it: NUL-separated, secrets filtered
// unless FAULTLINE_SCRUB=0.
char g_cmdline[sizeof(Config::argv) + 256];

int scrubbed_cmdline(const Config& cfg) {
  if (cfg.keep_secrets) {
    memcpy(g_cmdline, cfg.argv, static_cast<size_t>(cfg.argv_len));
    return cfg.argv_len;
  }
  ArgScrubber scrubber(cfg.scrub_keys);
  size_t len = 0;
  for (int off = 0; off < cfg.argv_len && len < sizeof g_cmdline;) {
    size_t n = str_nlen(cfg.argv + off, static_cast<size_t>(cfg.argv_len - off));
    len += scrubber.scrub(cfg.argv + off, n, g_cmdline + len, sizeof g_cmdline - len - 1);
    g_cmdline[len++] = '\0';
    off += static_cast<int>(n) + 1;
  }
  return static_cast<int>(len);
}

// "minidump: <how>: <what> (<errno name>)", kept in the arena.
void note_failure(Capture* c, const char* what, int err, const char* how = "not written") {
  char msg[160];
  StrBuf m(msg, sizeof msg);
  m.add("minidump: ").add(how).add(": ").add(what).add(" (").add(strerrorname_np(err)).add(")");
  const char* kept = g_crash.arena.dup(msg, sizeof msg);
  c->errors.add(kept                     ? kept
                : str_eq(how, "written") ? "minidump: written: not flushed to the disk"
                                         : "minidump: not written");
}

}  // namespace

void write_minidump_file(Capture* c) {
  // SIGXFSZ is ignored around this phase (capture.cpp): a file-size limit
  // costs the minidump, not the process.
  if (!report_temp_open(&g_temp)) {
    note_failure(c, "could not create its file", g_temp.err);
    return;
  }
  g_pending.store(true, std::memory_order_release);

  int n = 0;
  for (int i = 0; i < c->nthreads && n < kMaxThreads; ++i) {
    const ThreadCapture& t = c->threads[i];
    MinidumpThread& m = g_threads[n++];
    m = MinidumpThread{t.tid, nullptr, nullptr, 0, 0};
    if (t.tid == c->tid) {
      // The crashing thread: its signal context, the registers the report
      // lists (x86-64's FXSAVE area it points to is still in the signal
      // frame on this thread's stack).
      if (c->have_uc) {
        minidump_save_regs(&g_crash_regs, c->uc, /*foreign_fp=*/true);
        m.regs = &g_crash_regs;
      }
    } else if (t.regs) {
      m.regs = t.regs;
      if (t.regs->stack) {
        m.stack = t.regs->stack;
        m.stack_start = t.regs->stack_start;
        m.stack_len = t.regs->stack_len;
      }
    }
  }
  const Config& cfg = g_crash.config;
  MinidumpInput in = {};
  in.signo = capture_is_live(c->kind) ? 0 : c->signo;
  in.code = c->info.si_code;
  in.address = reinterpret_cast<uintptr_t>(c->info.si_addr);
  in.crashed_tid = c->tid;
  in.threads = g_threads;
  in.nthreads = n;
  in.modules = &c->modules;
  in.cmdline = g_cmdline;
  in.cmdline_len = scrubbed_cmdline(cfg);
  in.stack_bytes = kMinidumpDefaultStack;
  MinidumpResult r = {};
  bool ok = write_minidump(g_temp.fd, in, &r);
  // On a network filesystem flushed before its rename: while it is still
  // pending, so a stand-in removes it if the flush outlasts the watchdog.
  if (ok && !report_temp_flush_first(&g_temp)) {
    if (g_pending.exchange(false, std::memory_order_acq_rel)) {
      report_temp_discard(&g_temp);
      note_failure(c, "could not flush its file", g_temp.err);
    }
    return;
  }
  if (!g_pending.exchange(false, std::memory_order_acq_rel)) return;  // the stand-in removed it
  if (!ok) {
    report_temp_discard(&g_temp);
    note_failure(c, "write failed", r.err);
    return;
  }
  char name[sizeof c->minidump_file] = "";
  if (!report_temp_rename(&g_temp, *c, ".dmp", name, sizeof name)) {
    note_failure(c, "could not publish its file", g_temp.err);
    return;
  }
  // Named before the flush: a stand-in's report written while this thread
  // waits on the disk names the minidump too.
  str_copy(c->minidump_file, sizeof c->minidump_file, name);
  c->minidump_bytes = r.bytes;
  report_temp_finish(&g_temp);
  if (g_temp.sync_err != 0) {
    note_failure(c, "not flushed to the disk", g_temp.sync_err, "written");
  }
}

ThreadRegs* minidump_thread_room(Arena* arena) {
  // Crashes only: a live dump has no minidump.
  const Capture* c = g_crash.capture;
  if (!g_crash.config.minidump || !c || capture_is_live(c->kind)) return nullptr;
  ThreadRegs* r = arena->alloc_array<ThreadRegs>(1);
  if (r && arena->used() + kMinidumpDefaultStack <= arena->capacity() / 4) {
    // Not zeroed: the thread fills what it copies, and the pages it does
    // not reach are never touched.
    r->stack = static_cast<char*>(arena->alloc_uninit(kMinidumpDefaultStack, 16));
    r->stack_cap = r->stack ? kMinidumpDefaultStack : 0;
  }
  return r;
}

void minidump_save_thread(ThreadRegs* r, const ucontext_t* uc) {
  minidump_save_regs(r, *uc, /*foreign_fp=*/false);
  if (r->stack) {
    r->stack_len =
        minidump_read_stack(r->stack, minidump_regs_sp(*r), r->stack_cap, &r->stack_start);
  }
}

void end_minidump_phase(Capture* c) {
  if (discard_minidump_file(/*owner=*/true) || g_temp.fd < 0) return;
  // Published, then the phase was left during its flush: the file is
  // whole and named in the capture; only the flush is in doubt.
  report_temp_discard(&g_temp);
  const PhaseInfo& info = phase_info(Phase::kMinidump);
  for (int i = 0; i < c->errors.count; ++i) {
    if (c->errors.items[i] == info.text || c->errors.items[i] == info.timeout) {
      c->errors.items[i] = "minidump: written; its flush to the disk was cut short";
    }
  }
}

bool discard_minidump_file(bool owner) {
  if (!g_pending.exchange(false, std::memory_order_acq_rel)) return false;
  if (owner) {
    report_temp_discard(&g_temp);
  } else if (g_temp.dir_fd >= 0 && g_temp.tmp[0]) {
    // The stuck owner may still write to its descriptor: only the name goes,
    // so the number is never reused under it.
    unlinkat(g_temp.dir_fd, g_temp.tmp, 0);
  }
  return true;
}

}  // namespace faultline::core
