#include "core/capture/threads.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "core/base/recover.h"
#include "core/base/safe_read.h"
#include "core/base/sigaction_real.h"
#include "core/base/start_text.h"
#include "core/base/str.h"
#include "core/base/sys.h"
#include "core/capture/altstacks.h"
#include "core/capture/task_files.h"
#include "core/capture/thread_signal.h"
#include "core/crash_state.h"
#include "core/handler_state.h"
#include "core/minidump/minidump_file.h"
#include "core/unwind/unwind.h"
#include "core/unwind/unwind_with_cfi.h"

namespace faultline::core {
namespace {

// Where one thread's stack request stands. The owner moves it to
// kRequested before the signal; the target claims it, then either finishes
// (kDone) or parks (kParked) for the owner to unwind it and let it go
// (kDone). The owner withdraws what was not claimed in time (kIdle).
enum class RequestState : int {
  kIdle,       // idle, or withdrawn by the owner
  kRequested,  // asked; the signal is on its way
  kClaimed,    // the target is answering
  kParked,     // uc is set; the target waits for the owner to unwind it
  kDone,       // unwound by itself, or released by the owner
  kGone,       // the thread exited before it could be asked
};
using AtomicRequestState = std::atomic<RequestState>;
static_assert(AtomicRequestState::is_always_lock_free &&
                  sizeof(AtomicRequestState) == sizeof(int) &&
                  std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "a request state is a futex word");

// One request per thread slot. Written by the owner before the signal, by
// the target after.
struct Request {
  volatile pid_t tid;
  AtomicRequestState state;
  ThreadCapture* slot;
  int max_frames;
  const ucontext_t* volatile uc;
};

bool move(AtomicRequestState& s, RequestState from, RequestState to) {
  return s.compare_exchange_strong(from, to, std::memory_order_acq_rel);
}
RequestState load(const AtomicRequestState& s) {
  return s.load(std::memory_order_acquire);
}

// A parked thread gives up waiting after 30 s: by then the process has been
// ended by the watchdog, or the owner has died.
constexpr int kMaxParkSeconds = 30;
// Threads unwinding themselves right now. A late one (past the owner's
// deadline) still writes into its slot, so a new capture waits for it.
std::atomic<int> g_inflight{0};

// How many threads have answered (unwound or parked) in this capture; the
// owner sleeps on it.
std::atomic<int> g_answered{0};  // a futex word
// How many answers the owner waits for; until it knows (all signals sent),
// more than can come. Only the last answer wakes the owner: a wake per
// answer cost 256 context switches of the owner at 256 threads, on the same
// few CPUs the answering threads need.
std::atomic<int> g_expected{0};

const ModuleTable* volatile g_modules = nullptr;

struct Request;
void unwind_into(const ucontext_t* uc, Request& r, ThreadState* ts, const stack_t* running_on);

// True when this thread's current stack has room for its unwinder: not on
// a signal stack, or on one of at least 48 KiB for libunwind, or with
// kCfiStackBytes left below us for the CFI unwinder (Python's
// faulthandler gives the main thread a 16 KiB signal stack: with the CFI
// unwinder it unwinds itself instead of parking). The signal stack as the
// kernel saved it in the delivered context: no sigaltstack system call in
// each answering thread, and the settings at delivery (with SS_AUTODISARM
// the live ones say "disabled" while the handler runs on it).
bool stack_is_roomy(const stack_t& ss) {
  char here;
  if (!on_signal_stack(ss, reinterpret_cast<uintptr_t>(&here))) return true;
  if (unwind_uses_cfi() && stack_has_room(kCfiStackBytes, &ss)) return true;
  return ss.ss_size >= (48u << 10);
}

// futex(2) on a 32-bit atomic: raw system calls, async-signal-safe.
void futex_wait(const void* addr, int expected, int timeout_ms) {
  struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

void futex_wake(const void* addr) {
  syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0);
}

void answer() {
  int now = g_answered.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (now >= g_expected.load(std::memory_order_seq_cst)) futex_wake(&g_answered);
}

// 1 while a crash holds its answering threads (threads_hold_answers); a
// futex word. Bounded all the same: past the watchdog's both stages the
// process would have ended, so an owner still running is lost.
std::atomic<int> g_hold{0};
constexpr int kMaxHoldSeconds = 120;

// Keeps this thread in faultline's handler while the crash is held. The
// first thread held on a roomy stack stands in for the watchdog
// (handler_state.h): SIGALRM open to it, and it pokes itself should the
// first stage not have fired by its time (the owner stuck where no signal
// reaches it).
void stay_held(bool roomy) {
  WatchdogState& wd = g_handler.watchdog;
  pid_t self = 0, none = 0;
  bool stand_in =
      roomy && wd.active.load(std::memory_order_acquire) && wd.seconds > 0 &&
      wd.stand_in.compare_exchange_strong(none, self = sys_gettid(), std::memory_order_acq_rel);
  // The watching thread too, should it be held: the first expiry is its.
  if (stand_in || wd.watch.load(std::memory_order_acquire) == sys_gettid()) {
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    sigprocmask(SIG_UNBLOCK, &alrm, nullptr);
  }
  const uint64_t poke_at =
      wd.armed_ns + (static_cast<uint64_t>(wd.seconds) + 1) * 1000 * 1000 * 1000;
  bool poked = false;
  for (int waited_ms = 0; g_hold.load(std::memory_order_acquire) == 1; waited_ms += 250) {
    if (waited_ms > kMaxHoldSeconds * 1000) break;
    futex_wait(&g_hold, 1, 250);
    if (stand_in && !poked && wd.active.load(std::memory_order_acquire) &&
        wd.stage.load(std::memory_order_acquire) == WatchdogStage::kArmed &&
        monotonic_ns() >= poke_at) {
      poked = true;
      syscall(SYS_tgkill, sys_getpid(), self, SIGALRM);
    }
  }
}

constexpr int kMaxRequests = 1024;
Request g_requests[kMaxRequests];
volatile int g_nrequests = 0;
std::atomic<bool> g_active{false};  // a capture is asking
pid_t g_pid = 0;
// The next request to be asked. The owner asks them in order, and each
// thread that answers asks the next one before it unwinds itself: a woken
// thread often preempts the owner on its CPU, and with only the owner
// asking, the other CPUs went idle while it waited for its turn (half the
// threads phase at 64 threads on two CPUs). Each index is taken once.
std::atomic<int> g_next_ask{kMaxRequests};
pid_t g_ask_pid = 0;
// Between ask_other_threads and collect_other_threads: when the asking
// ended, and the thread slots listed (the owner's own included).
uint64_t g_asked_ns = 0;
int g_asked_count = 1;

// Asks request i's thread for its stack. Its signal stack's top first: the
// kernel writes the signal frame there and the unwinder runs below it; one
// system call here instead of page faults there. A thread that exited
// counts as answered.
void ask(int i) {
  Request& r = g_requests[i];
  // A thread that took its index just before the owner withdrew: the
  // request is gone (narrows the window; a late signal finds nothing to do).
  if (!g_active.load(std::memory_order_acquire)) return;
  pid_t tid = r.tid;
  if (blocks_signal(tid, thread_signal_number())) {
    // A thread collecting signals with sigwait() (every asynchronous one
    // blocked) would take the request as its own: the program shuts down,
    // or acts on signal 61. Never sent; listed without its stack.
    if (move(r.state, RequestState::kRequested, RequestState::kGone)) {
      r.slot->note =
          "not asked for its stack: it blocks the thread-dump signal (a sigwait() thread, or "
          "every signal blocked), and would have taken the request as its own signal";
      answer();
    }
    return;
  }
  altstack_prefault(tid, kAltStackPrefaultBytes);
  if (syscall(SYS_tgkill, g_ask_pid, tid, thread_signal_number()) == 0) return;
  // Not asked: counted as answered at once, so the owner does not wait for
  // it. EAGAIN: the user's queue of real-time signals is full.
  int err = errno;
  if (move(r.state, RequestState::kRequested, RequestState::kGone)) {
    r.slot->note = err == ESRCH ? "thread exited before it could be asked for its stack"
                   : err == EAGAIN
                       ? "could not be asked for its stack: the queue of real-time signals is "
                         "full (RLIMIT_SIGPENDING)"
                       : "could not be asked for its stack: the thread-dump signal was refused";
    answer();
  }
}

// Asks the next request not yet asked; false when all have been.
bool ask_next() {
  int i = g_next_ask.fetch_add(1, std::memory_order_acq_rel);
  if (i >= g_nrequests || i >= kMaxRequests) return false;
  ask(i);
  return true;
}

// The owner: asks every request not yet asked, then tells answer() how
// many answers to wait for. One deadline for all: threads park in
// parallel; the last one wakes the owner (an answer before this store sees
// more expected and wakes nobody; the owner's wait loop then sees it).
void finish_asking(int nreq) {
  while (ask_next()) {
  }
  g_expected.store(nreq, std::memory_order_seq_cst);
}

// The thread-dump signal's handler: runs on the target thread.
// Unwinds a thread from its context into its slot. A corrupt stack ends
// that thread's walk (the recovery point), not the capture. savemask 0: our
// handlers block nothing extra (SA_NODEFER, empty sa_mask), and saving the
// mask would cost a system call per thread.
__attribute__((noinline)) void unwind_into(const ucontext_t* uc, Request& r, ThreadState* ts,
                                           const stack_t* running_on) {
  CaptureErrors errors = {};
  if (!ts) {
    unwind_from_context(uc, *g_modules, r.slot, r.max_frames, &errors, running_on);
  } else if (sigsetjmp(ts->recover, 0) == 0) {
    ts->recover_armed = 1;
    unwind_from_context(uc, *g_modules, r.slot, r.max_frames, &errors, running_on);
  } else {
    safe_read_end_reads();  // a pipe read the jump abandoned
    errors.add("unwind: fault while unwinding this thread (frames so far kept)");
  }
  if (ts) ts->recover_armed = 0;
  if (errors.count && !r.slot->note) r.slot->note = errors.items[0];
}

}  // namespace

void thread_signal_handler(int signo, siginfo_t* info, void* ucv) {
  int saved = errno;
  // In flight from before the check that a capture is asking: a capture
  // that ends while this thread is anywhere between that check and its
  // answer (a late answer) is not followed by one that reuses the requests
  // and the arena under it (threads_quiet waits for the count).
  g_inflight.fetch_add(1, std::memory_order_seq_cst);
  // g_pid first: a system call costs ~1 us in a virtual machine, and each
  // of the answering threads pays it.
  if (!g_active.load(std::memory_order_seq_cst) || info->si_code != SI_TKILL ||
      (info->si_pid != g_pid && info->si_pid != sys_getpid())) {
    g_inflight.fetch_sub(1, std::memory_order_acq_rel);
    errno = saved;
    chain_previous(signo, info, ucv);  // not ours: the program's own use of the signal
    return;
  }
  pid_t self = sys_gettid();
  bool parked = false;
  bool held = false;   // this answer belongs to a crash's capture
  bool roomy = false;  // it unwound itself: its stack has room
  int n = g_nrequests;
  for (int i = 0; i < n && i < kMaxRequests; ++i) {
    Request& r = g_requests[i];
    if (r.tid != self || !move(r.state, RequestState::kRequested, RequestState::kClaimed)) {
      continue;
    }
    // The tid read before the claim may be a previous capture's: the owner
    // writes the tid before the state, so after the claim it is current.
    if (r.tid != self) {
      // Its thread may have found it claimed and gone: asked again.
      if (move(r.state, RequestState::kClaimed, RequestState::kRequested)) ask(i);
      continue;
    }
    held = g_hold.load(std::memory_order_acquire) == 1;
    ask_next();                                    // keep the other CPUs busy: pass the asking on
    ThreadState* found = thread_state_find(self);  // never claims: a parked thread needs none
    const ucontext_t* secondary = found ? found->secondary_uc : nullptr;
    const ucontext_t* uc = secondary ? secondary : static_cast<ucontext_t*>(ucv);
    // Our own name, without three /proc system calls in the owner.
    prctl(PR_GET_NAME, r.slot->name, 0, 0, 0);
    if (r.slot->regs) minidump_save_thread(r.slot->regs, uc);
    if (secondary) r.slot->note = "this thread crashed too, after the first crash";
    const stack_t& running_on = static_cast<const ucontext_t*>(ucv)->uc_stack;
    if (stack_is_roomy(running_on)) {
      roomy = true;
      // Unwind ourselves, here: another thread may hold the loader's lock
      // that libunwind takes, and it can only let go if it is not parked.
      // Its recovery point: this thread's entry, claimed if it has none.
      unwind_into(uc, r, found ? found : thread_state(self), &running_on);
      // Counted only if the owner still expects it: a late answer must not
      // count in a later capture's tally.
      if (move(r.state, RequestState::kClaimed, RequestState::kDone)) answer();
      break;
    }
    // A small signal stack (Python's faulthandler gives the main thread
    // one of under 10 KiB) cannot hold libunwind: park, and let the owner
    // unwind us from our context on its own stack. Only if the owner still
    // expects us: a late answer must not park forever.
    r.uc = uc;
    if (!move(r.state, RequestState::kClaimed, RequestState::kParked)) break;
    // The owner unwinds a parked thread before its capture ends, and this
    // thread writes nothing more: no longer in flight.
    parked = true;
    answer();  // then out of flight: the answer belongs to this capture's tally
    g_inflight.fetch_sub(1, std::memory_order_acq_rel);
    // Sleep in the kernel until released.
    for (int waited_s = 0; load(r.state) == RequestState::kParked; ++waited_s) {
      if (waited_s > kMaxParkSeconds) break;  // the owner is gone: never hang a thread
      futex_wait(&r.state, static_cast<int>(RequestState::kParked), 1000);
    }
    break;
  }
  if (!parked) g_inflight.fetch_sub(1, std::memory_order_acq_rel);
  // Out of flight first: a capture after a recovered crash must not wait
  // for a thread that is only held.
  if (held) stay_held(roomy);
  errno = saved;
}

// Not inlined into capture_other_threads, whose sigsetjmp would make its
// locals "clobbered" (-Wclobbered).
__attribute__((noinline)) int list_threads(int dir, pid_t self, ThreadCapture* threads,
                                           int capacity, int* threads_total) {
  int count = 1;
  for_each_dir_entry(dir, [&](const char* name) {
    int64_t tid = 0;
    if (!parse_int(name, &tid) || tid <= 0 || tid == self) return false;
    ++*threads_total;
    if (count >= capacity) return false;
    threads[count++].tid = static_cast<pid_t>(tid);
    return false;
  });
  return count;
}

void read_thread_name(pid_t tid, char* out, size_t cap) {
  long n = read_task_file(tid, "comm", out, cap);
  if (n <= 0) {
    out[0] = '\0';
    return;
  }
  if (out[n - 1] == '\n') out[n - 1] = '\0';
}

void note_secondary_crash(const ucontext_t* uc) {
  if (ThreadState* ts = thread_state()) ts->secondary_uc = uc;
}

void threads_hold_answers() {
  g_hold.store(1, std::memory_order_release);
}

void threads_release_held() {
  if (g_hold.exchange(0, std::memory_order_acq_rel) == 1) futex_wake(&g_hold);
}

void threads_abort_capture() {
  g_asked_count = 1;  // a collecting cut short twice: no stale count for the next capture
  if (!g_active.load(std::memory_order_acquire) && g_nrequests == 0) return;
  g_active.store(false, std::memory_order_release);
  g_next_ask.store(kMaxRequests, std::memory_order_release);  // nothing more to ask
  int n = g_nrequests;
  for (int i = 0; i < n && i < kMaxRequests; ++i) {
    Request& r = g_requests[i];
    move(r.state, RequestState::kRequested, RequestState::kIdle);
    if (move(r.state, RequestState::kParked, RequestState::kDone)) futex_wake(&r.state);
  }
  g_nrequests = 0;
}

FAULTLINE_START_TEXT void threads_reset_after_fork() {
  g_pid = sys_getpid();
  g_active.store(false, std::memory_order_relaxed);
  g_nrequests = 0;
  g_inflight.store(0, std::memory_order_relaxed);
  g_answered.store(0, std::memory_order_relaxed);
  // In .data, whose page a fork child need not copy when it is unchanged.
  if (g_next_ask.load(std::memory_order_relaxed) != kMaxRequests) {
    g_next_ask.store(kMaxRequests, std::memory_order_relaxed);
  }
  if (g_asked_count != 1) g_asked_count = 1;  // .data too
  if (g_hold.load(std::memory_order_relaxed) != 0) g_hold.store(0, std::memory_order_relaxed);
  thread_signal_reset_after_fork();
}

FAULTLINE_START_TEXT void threads_set_pid(pid_t pid) {
  g_pid = pid;
}

bool threads_quiet(int timeout_ms) {
  for (int waited = 0; g_inflight.load(std::memory_order_acquire) > 0; ++waited) {
    if (waited >= timeout_ms) return false;
    struct timespec pause = {0, 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
  return true;
}

int ask_other_threads(ThreadCapture* threads, int capacity, int max_with_stacks, int max_frames,
                      const ModuleTable& modules, Arena* arena, int* threads_total, int* cut,
                      CaptureErrors* errors) {
  *threads_total = 1;
  g_asked_count = 1;
  g_asked_ns = monotonic_ns();
  *cut = 0;
  pid_t self = threads[0].tid;
  int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    errors->add("threads: /proc/self/task is not readable; only the crashing thread is listed");
    return 1;
  }
  const int count = list_threads(dir, self, threads, capacity, threads_total);
  close(dir);
  if (*threads_total > capacity) {
    errors->add("threads: more threads than the report can list; the rest are counted only");
  }

  // Ask each thread (up to the cap) to unwind itself. Nothing is asked
  // while the requests are written (a capture cut short left the count).
  g_next_ask.store(kMaxRequests, std::memory_order_release);
  bool can_signal = thread_signal_number() > 0;
  if (!can_signal)
    errors->add("threads: no thread-dump signal installed; other stacks not captured");
  if (can_signal && count > 1) reclaim_thread_signal(errors);
  int nreq = 0;
  for (int i = 1; i < count; ++i) {
    ThreadCapture* t = &threads[i];
    if (i < max_with_stacks) {
      t->frames = arena->alloc_array<NativeFrame>(static_cast<size_t>(max_frames));
      t->regs = minidump_thread_room(arena);
    }
    if (i >= max_with_stacks || nreq >= kMaxRequests || !t->frames) {
      t->note = "over the thread cap (FAULTLINE_MAX_THREADS): stack not captured";
      ++*cut;
      continue;
    }
    if (!can_signal) continue;
    Request& r = g_requests[nreq++];
    r.tid = t->tid;
    r.slot = t;
    r.max_frames = max_frames;
    r.state.store(RequestState::kRequested, std::memory_order_release);
  }
  g_nrequests = nreq;
  g_answered.store(0, std::memory_order_release);
  g_expected.store(kMaxRequests + 1, std::memory_order_seq_cst);
  g_modules = &modules;
  g_ask_pid = sys_getpid();
  // Known to collect_other_threads before any asking: a fault in the middle
  // of it leaves the rest to be asked there.
  g_asked_count = count;
  g_next_ask.store(0, std::memory_order_release);
  g_active.store(true, std::memory_order_release);
  finish_asking(nreq);
  g_asked_ns = monotonic_ns();
  return count;
}

int collect_other_threads(ThreadCapture* threads, int timeout_ms, const ModuleTable& modules,
                          uint64_t* park_ns, CaptureErrors* errors) {
  // Kept until the end: collecting cut short by the watchdog is run again
  // (without waiting) and finds the same threads.
  const int count = g_asked_count;
  const int nreq = g_nrequests;
  // An asking cut short (a fault in it): the rest are asked now; not once
  // the watchdog has fired (they would be withdrawn at once).
  if (g_active.load(std::memory_order_acquire) && !watchdog_fired()) finish_asking(nreq);
  // The deadline counts from the asking: the caller's own work since then
  // (the crash's own stack, the Python walk) ran while the threads answered.
  // Still a short grace from now, for threads merely slow to be scheduled
  // behind that work; none once the watchdog has fired.
  const uint64_t now = monotonic_ns();
  uint64_t end = g_asked_ns + static_cast<uint64_t>(timeout_ms) * 1000000;
  uint64_t grace = now + static_cast<uint64_t>(timeout_ms < 100 ? timeout_ms : 100) * 1000000;
  if (end < grace) end = grace;
  if (watchdog_fired()) end = now;
  const uint64_t start = g_asked_ns;
  for (;;) {
    int answered = g_answered.load(std::memory_order_seq_cst);
    if (answered >= nreq) break;
    uint64_t t = monotonic_ns();
    if (t >= end) break;
    long left = static_cast<long>((end - t) / 1000000) + 1;
    futex_wait(&g_answered, answered, left < 20 ? static_cast<int>(left) : 20);
  }
  // Withdraw what was not answered, so a late answer finds nothing to do.
  g_active.store(false, std::memory_order_release);
  int unanswered = 0;
  for (int i = 0; i < nreq; ++i) {
    Request& r = g_requests[i];
    if (move(r.state, RequestState::kRequested, RequestState::kIdle)) {
      ++unanswered;
      r.slot->captured = false;
      r.slot->proc_state = read_thread_state(r.tid);
      read_task_file(r.tid, "wchan", r.slot->wchan, sizeof r.slot->wchan);
      r.slot->note =
          "did not answer the thread-dump signal (signals blocked or stuck in the kernel)";
      r.slot->nframes = 0;
    }
  }
  *park_ns = monotonic_ns() - start;
  // Threads that parked are unwound here, then let go; threads that
  // unwound themselves are done; a thread still unwinding itself when the
  // deadline passed keeps what it has written so far.
  for (int i = 0; i < nreq; ++i) {
    Request& r = g_requests[i];
    RequestState st = load(r.state);
    if (st == RequestState::kDone) {
      r.slot->captured = r.slot->nframes > 0;
      continue;
    }
    RequestState expected = RequestState::kClaimed;
    if (st == RequestState::kClaimed &&
        r.state.compare_exchange_strong(expected, RequestState::kIdle, std::memory_order_acq_rel)) {
      ++unanswered;
      r.slot->captured = r.slot->nframes > 0;
      r.slot->note = "still unwinding when the wait ended; frames may be incomplete";
      continue;
    }
    if (expected == RequestState::kDone) {  // it finished just now
      r.slot->captured = r.slot->nframes > 0;
      continue;
    }
    if (watchdog_fired() && load(r.state) == RequestState::kParked) {
      // Out of time: let the parked thread go without its stack.
      r.slot->note = "not unwound: the watchdog cut the capture short";
      r.state.store(RequestState::kDone, std::memory_order_release);
      futex_wake(&r.state);
      continue;
    }
    if (load(r.state) != RequestState::kParked) continue;
    CaptureErrors local = {};
    // A corrupt stack ends that thread's walk, not the capture: a recovery
    // point of its own, and the enclosing phase's restored afterwards.
    ThreadState* ts = thread_state();
    sigjmp_buf outer;
    volatile int outer_armed = ts ? ts->recover_armed : 0;
    if (ts) __builtin_memcpy(&outer, &ts->recover, sizeof outer);
    // savemask 0: our handlers block nothing extra (SA_NODEFER, empty
    // sa_mask), and saving the mask would cost a system call per thread.
    if (!ts) {
      unwind_from_context(r.uc, modules, r.slot, r.max_frames, &local);
    } else if (sigsetjmp(ts->recover, 0) == 0) {
      ts->recover_armed = 1;
      unwind_from_context(r.uc, modules, r.slot, r.max_frames, &local);
    } else {
      safe_read_end_reads();  // a pipe read the jump abandoned
      local.add(
          watchdog_took_phase()
              ? "unwind: out of time (watchdog) while unwinding this thread (frames so far kept)"
              : "unwind: fault while unwinding this thread (frames so far kept)");
    }
    if (ts) {
      __builtin_memcpy(&ts->recover, &outer, sizeof outer);
      ts->recover_armed = outer_armed;
    }
    if (local.count && !r.slot->note) r.slot->note = local.items[0];
    r.slot->captured = r.slot->nframes > 0;
    r.state.store(RequestState::kDone, std::memory_order_release);
    futex_wake(&r.state);
  }
  g_nrequests = 0;
  g_next_ask.store(kMaxRequests, std::memory_order_release);
  // Threads that did not name themselves (no answer, over the cap): /proc.
  for (int i = 1; i < count; ++i) {
    if (!threads[i].name[0])
      read_thread_name(threads[i].tid, threads[i].name, sizeof threads[i].name);
  }
  if (unanswered) errors->add("threads: some threads did not answer in time; see their notes");
  for (int i = 1; i < count; ++i) {
    if (!threads[i].captured && !threads[i].proc_state)
      threads[i].proc_state = read_thread_state(threads[i].tid);
  }
  g_asked_count = 1;
  return count;
}

}  // namespace faultline::core
