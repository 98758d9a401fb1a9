// Native stacks of every thread, captured in-process without ptrace.
//
// The thread that owns the crash lists the process's threads
// (/proc/self/task, read with getdents64), gives each one a slot in the
// arena, and sends it a dedicated real-time signal with tgkill. Each thread
// unwinds itself from its own ucontext into its slot and marks it done; the
// owner waits for all of them with one bounded timeout. A thread that does
// not answer (signals blocked, stuck in the kernel) is listed with its state
// and wchan from /proc and marked as not captured.
//
// Async-signal-safe.
#pragma once

#include <signal.h>

#include "core/base/arena.h"
#include "core/frames.h"
#include "core/modules/modules.h"

namespace faultline::core {

// Install time: the process whose requests the handler answers (a fork
// child's are its own: threads_reset_after_fork).
void threads_set_pid(pid_t pid);

// The thread-dump signal's handler, on each asked thread: it answers a
// capture's request (the signal's disposition: thread_signal.h).
void thread_signal_handler(int signo, siginfo_t* info, void* ucv);

// Crash time, in two steps, so the owner does its own work while the other
// threads answer. threads[0] is the owner's own entry (its tid set).
// ask_other_threads lists the other threads into threads[1..] and asks each
// (up to the cap) to unwind itself; returns the number of entries.
// `threads_total` receives the number of threads seen, `cut` how many were
// listed without stacks because of the cap.
int ask_other_threads(ThreadCapture* threads, int capacity, int max_with_stacks, int max_frames,
                      const ModuleTable& modules, Arena* arena, int* threads_total, int* cut,
                      CaptureErrors* errors);
// Waits (timeout_ms from the asking) for the answers, unwinds the threads
// that parked, notes the rest; returns the number of entries (as
// ask_other_threads did; 1 if it did not run). `park_ns`: from the asking
// to the last answer or the deadline.
int collect_other_threads(ThreadCapture* threads, int timeout_ms, const ModuleTable& modules,
                          uint64_t* park_ns, CaptureErrors* errors);

// The threads in /proc/self/task (open at dir) other than self, into
// threads[1..capacity); all counted in *threads_total. Returns the slots used
// (threads[0] counted). Asks nothing of them.
int list_threads(int dir, pid_t self, ThreadCapture* threads, int capacity, int* threads_total);

// Reads a thread's name from /proc/self/task/<tid>/comm into out (cap bytes).
void read_thread_name(pid_t tid, char* out, size_t cap);

// A thread that crashed while another thread owned the crash records its
// crash context here before waiting, so the dump request unwinds the crash
// and not the wait.
void note_secondary_crash(const ucontext_t* uc);

// Ends an interrupted capture (the watchdog jumped out of it): withdraws
// open requests and lets parked threads go. Idempotent.
void threads_abort_capture();
// At a crash the process is about to end, and nothing of the program may run
// before it does: a thread that answered and went back would find its
// interrupted poll(), epoll_wait(), select() or nanosleep() failing with
// EINTR (never restarted after a handler, SA_RESTART or not), and could act
// on it (exit 0, a fatal error) before the report is out. Held, answering
// threads stay in faultline's handler until the process ends, or until
// threads_release_held() when it goes on (the program's handler recovered).
// Not for a live dump: the process goes on at once.
void threads_hold_answers();
void threads_release_held();

// In a fork child: no capture is in progress there.
void threads_reset_after_fork();

// Waits (bounded) until no thread is still unwinding itself from an earlier
// capture; false if one still is. A live dump must not start before.
bool threads_quiet(int timeout_ms);

}  // namespace faultline::core
