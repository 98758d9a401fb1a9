// The handler's shared state: one constant-initialized object (g_handler)
// for ownership, the watchdog, the crash stack and the report file. Every
// field that two threads touch is a lock-free std::atomic (plain loads and
// stores compile to instructions, never to library calls). doc/design.md
// explains the three protocols these fields carry.
#pragma once

#include <signal.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>

#include <atomic>

#include "core/phase.h"

#if defined(__clang__)
#define FAULTLINE_CONSTINIT [[clang::require_constant_initialization]]
#else
#define FAULTLINE_CONSTINIT __constinit
#endif

namespace faultline::core {

// The owner word: the owning thread's tid, with kDumpBit set while that
// owner takes a live dump. One atomic word, so a crash can never mistake a
// dump for another crash in the window between claiming and flagging.
constexpr pid_t kDumpBit = 0x40000000;  // tids are below 2^22
// The owner word for good once faultline stepped aside for a seccomp filter
// (install/seccomp_filter.h): a crash that reached the handler before then
// is handed on with no report (its system calls may be fatal now).
constexpr pid_t kStoodDown = 0x20000000;

// Who writes the crash report. One compare-and-swap from kNobody, so never both.
enum class Writer : int {
  kNobody,
  kOwner,     // the thread that owns the crash (the normal case)
  kWatchdog,  // another thread, after the watchdog's second stage
};

// The watchdog's two stages (watchdog.h).
enum class WatchdogStage : int {
  kArmed,   // the alarm is set and has not expired
  kFirst,   // first expiry: the owner abandons the slow phase
  kSecond,  // second expiry: another thread writes the report, the process ends
};

struct WatchdogState {
  std::atomic<WatchdogStage> stage{WatchdogStage::kArmed};
  std::atomic<bool> active{false};           // armed by a crash owner
  std::atomic<bool> phase_abandoned{false};  // the owner acted on the first expiry
  std::atomic<bool> jumped{false};           // that jump not yet told from a fault's
  std::atomic<bool> late_cut{false};         // the owner left a late phase at the second expiry
  std::atomic<uint64_t> fired_ns{0};         // when the first expiry came (monotonic)
  std::atomic<int> forwarding{0};            // threads forwarding the alarm to the owner
  std::atomic<pid_t> owner{0};               // the thread the alarm is for
  struct sigaction old_alarm {};             // the program's SIGALRM action
  // The program's own real-time timer (alarm, setitimer), which the
  // watchdog's alarm replaces, and when: put back once the report is done,
  // for a process that goes on.
  struct itimerval program_timer {};
  uint64_t armed_ns = 0;
  int seconds = 0;  // as armed
  // A thread held at the crash (threads.h) that stands in for the owner:
  // the second stage's timer goes to it, and it pokes itself should the
  // first stage never reach the owner (0: none).
  std::atomic<pid_t> stand_in{0};
  // The thread the first expiry goes to: one the kernel could have given a
  // process-directed alarm, less any that blocks SIGALRM or waits for it in
  // sigwait(); the owner when there is none.
  std::atomic<pid_t> watch{0};
  int timer_id = -1;  // the kernel's POSIX timer (-1: none)
};

struct HandlerState {
  // Ownership (handler.cpp).
  std::atomic<pid_t> owner{0};  // the owner word (kDumpBit); 0 while none
  std::atomic<Writer> writer{Writer::kNobody};
  std::atomic<int> signo{0};  // the owner's crash signal, 0 in a dump
  // Monotonic time the owner claimed the crash or dump (0 while none): the
  // capture's faultline.capture_ns counts from here, so the steps before the
  // capture proper (the watchdog, SIGPIPE, the crash stack, waiting for
  // threads still answering a live dump) are in it.
  uint64_t claimed_ns{0};
  // A process-sent fatal signal that reached the owner of a live dump;
  // raised again when the dump is done, with its siginfo as it came.
  std::atomic<int> deferred_signal{0};
  siginfo_t deferred_info{};
  // Counts finished crash reports: threads that crashed meanwhile hand their
  // own signals on when it moves.
  std::atomic<int> report_gen{0};
  std::atomic<int> dumps_written{0};
  // A crash waits for the live dump that owns the handler: a helper dump
  // (helper_dump.h) gives up at once, so the crash is reported sooner.
  std::atomic<bool> crash_waiting{false};
  // The thread whose dump signal must take the signal request, never the
  // helper: faultline_dump_now() sends it after its helper dump failed.
  std::atomic<pid_t> dump_by_signal_tid{0};
  // Where the owner is (phase.h), for messages.
  std::atomic<Phase> phase{Phase::kStart};
  WatchdogState watchdog{};
  // The crash stack (crash_stack.cpp): lowest usable byte, and the signal
  // mask to run the capture with.
  char* crash_stack{nullptr};
  sigset_t switch_mask{};
  // The report file (report_file.cpp).
  char last_report[4200]{};
  int write_errno{0};      // why the last report could not be written
  int report_sequence{0};  // numbers live dumps of one thread
  // The program's handler that ran before the report was CPython's
  // faulthandler: it wrote the Python text already (stderr_summary.cpp).
  bool python_text_written{false};
  // That handler's address, for what the interposer could not tell (a
  // CPython linked into an executable that exports none of its symbols):
  // the report's writer compares it with the module holding _PyRuntime.
  uintptr_t fatal_handler_pc{0};
};

static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<Writer>::is_always_lock_free &&
                  std::atomic<WatchdogStage>::is_always_lock_free &&
                  std::atomic<Phase>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "the crash path uses lock-free atomics only");

extern HandlerState g_handler;

// The watchdog as the capture phases see it (the watchdog itself is
// signal/watchdog.h): plain reads of its state, so that a phase below the
// signal layer can ask without depending on it.

// Seconds between the watchdog's first and second stage.
constexpr int kWatchdogGraceSeconds = 2;

// How long the symbols may still take once the first stage has come: a
// quarter of the grace period, the rest is the report's.
constexpr uint64_t kLateSymbolsNs = 500ull * 1000 * 1000;

// True once the watchdog's first stage has passed.
inline bool watchdog_fired() {
  return g_handler.watchdog.stage.load(std::memory_order_acquire) != WatchdogStage::kArmed;
}

// When the first stage came (CLOCK_MONOTONIC ns), 0 before.
inline uint64_t watchdog_fired_ns() {
  return g_handler.watchdog.fired_ns.load(std::memory_order_acquire);
}

// True once, at the recovery point the first stage jumped to: that jump
// was the watchdog's, not a fault's.
inline bool watchdog_took_phase() {
  return g_handler.watchdog.jumped.exchange(false, std::memory_order_acq_rel);
}

}  // namespace faultline::core
