// The crash path's state: everything prepared at install (Config) and the
// arena the capture lives in. One global instance (g_crash), set up by
// src/install/install.cpp in normal context and used by the handler.
//
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/arena.h"
#include "core/base/fd_identity.h"
#include "core/capture.h"
#include "core/frames.h"
#include "faultline/faultline.h"

struct faultline_callback_writer;

namespace faultline::core {

// What a disposition runs (its function and whether it takes siginfo): all
// that comparisons of dispositions need (signal/chain.h compares them).
struct HandlerFn {
  uintptr_t fn;
  bool siginfo;
};

// Who runs first at a hardware fault when the program has its own handler
// behind faultline's (core/signal/chain_call.cpp).
enum class ChainOrder : int {
  kHandlerFirst,  // the program's handler first (the default, `auto`)
  kReportFirst,   // faultline's report first
};

// Prepared at install, read-only in the handler. Laid out for start-up:
// what every install writes comes first (small fields, then the starts of
// the strings), so a process touches few of its pages (a first touch is a
// page fault, ~10 us in a virtual machine).
struct Config {
  int dir_fd{};     // O_DIRECTORY fd, -1 if it could not be opened
  int dir_errno{};  // why not
  bool write_stderr{};
  uint64_t signals{};  // bit per signal
  int max_frames{};
  int max_threads{};        // threads with full native stacks
  int thread_signal{};      // real-time signal that asks a thread for its stack
  int thread_timeout_ms{};  // how long to wait for all threads' answers
  int dump_signal{};        // live-dump signal, 0: none
  void (*callback)(faultline_callback_writer*, void*){};
  void* callback_data{};
  int watchdog_seconds{};
  size_t arena_bytes{};
  ChainOrder chain_order{ChainOrder::kHandlerFirst};  // FAULTLINE_CHAIN_ORDER
  bool minidump{};  // a minidump beside each crash report (FAULTLINE_MINIDUMP)
  // FAULTLINE_SAME_CRASH_LIMIT=COUNT/SECONDS (0: no limit) and
  // FAULTLINE_DIR_LIMIT_MB (0: no cap), write/crash_limits.h.
  int same_crash_count{}, same_crash_seconds{};
  uint64_t dir_limit_bytes{};
  // Process facts gathered at install.
  bool keep_secrets{};     // FAULTLINE_SCRUB=0: argv not filtered for secrets
  char scrub_keys[512]{};  // FAULTLINE_SCRUB_KEYS: more sensitive words, comma-separated
  int argv_len{};
  bool argv_truncated{};  // argv did not fit: the report says so (process.argv_truncated)
  int64_t start_sec{}, start_nsec{};
  // The path the program was started by (AT_EXECFN): a link or one of the
  // names a program is shipped under (redis-server is redis-check-rdb).
  char exec_name[512]{};
  char argv[8192]{};  // NUL-separated
  char dir[4096]{};   // absolute report directory (for messages)
};

constexpr int kReservedFds = 3;

// All zeros until the first install (in .bss: a page costs one fault when
// first written, not a read and a copy-on-write). What every install
// writes comes first: the small fields and the default signals'
// previous[] fill the first page (g_crash is page-aligned); Config's start
// and its strings' first bytes typically take two more (a command line
// longer than ~400 bytes, or FAULTLINE_SIGNALS naming other signals, a
// page or two more: speed only).
struct CrashState {
  bool installed{};
  pid_t pid{};  // our pid, updated in fork children
  // Closed at crash time so that a process out of descriptors can still
  // make the safe reader's pipe (two), open a symbol table and its report
  // (one more): a pipe's two ends and a duplicate (see reserve_fds); set by
  // the first install (-1 if none). Never closed unless still ours.
  int reserved_fd[kReservedFds]{};
  FdIdentity reserved_id[kReservedFds]{};  // what each is (the program may reuse the number)
  FdIdentity dir_id{};                     // what config.dir_fd is
  bool handled[65]{};
  // Bit s-1: previous[s] was installed later by CPython itself (its
  // faulthandler, which writes the Python text before it re-raises).
  uint64_t previous_is_python{};
  // The installing thread's alternate stack (install_altstack): here,
  // beside fields install writes anyway, rather than in core/altstacks'
  // table, whose page every process would otherwise touch at start-up.
  pid_t altstack_tid{};
  uintptr_t altstack_lo{}, altstack_hi{};
  Arena arena{};
  Capture* capture{};  // in the arena
  // Install writes the entries of the handled signals (by default 4 to 11,
  // on the page of the fields above), not the whole table.
  struct sigaction previous[65]{};
  Config config{};
};

// What faultline_callback_writer points to.
struct CallbackWriter {
  static constexpr int kMax = FAULTLINE_CALLBACK_PAIRS_MAX;
  Arena* arena;
  AnnotationView* items;
  int count;
};

extern CrashState g_crash;

}  // namespace faultline::core
