// The options struct across versions. It grows at its end; `size` says how
// much of it a caller knows. A caller built against an older faultline.h
// gets the defaults for the fields it lacks; one built against a newer
// faultline.h may pass a bigger struct as long as it sets nothing this
// library does not know (the rule of Linux's extensible syscall structs).
// 0.1.0's struct had no size: its programs still work through the 0.1.0
// entry point faultline_options_init(), below. The defaults come from the
// FAULTLINE_* variables (options_defaults), read here with the deployment
// switches that are not fields of the struct.
#include "install/options.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/arena.h"
#include "core/base/raw_log.h"
#include "core/base/rt_signal.h"
#include "core/base/signals.h"
#include "core/base/str.h"
#include "core/capture.h"
#include "core/crash_state.h"

namespace faultline::install {

using core::ChainOrder;
using core::Config;
using core::kDefaultArenaBytes;
using core::kFatalSignalCount;
using core::kFatalSignals;
using core::kMaxThreads;
using core::kRtSignalMax;
using core::parse_int;
using core::parse_rt_signal_name;
using core::parse_signal;
using core::raw_log;
using core::str_copy;
using core::str_copy_n;
using core::str_eq;
using core::str_find;
using core::str_len;

namespace {

constexpr int kDefaultWatchdogSeconds = 10;

// Reads an integer variable within [lo, hi]; keeps *out on a bad value.
void env_int(const char* var, int64_t lo, int64_t hi, int64_t* out) {
  const char* v = secure_getenv(var);
  if (!v || !*v) return;
  int64_t n;
  if (!parse_int(v, &n)) return warn_bad(var, v, "not a whole number");
  if (n < lo || n > hi) return warn_bad(var, v, "out of range");
  *out = n;
}

// Why parse_signal refused word: SIGRTMAX (64) is a signal, but past the
// 63 a setting holds (a bit each).
const char* unknown_signal_reason(const char* word) {
  int64_t n = 0;
  if ((parse_int(word, &n) && n == kRtSignalMax) || parse_rt_signal_name(word) == kRtSignalMax) {
    return "signal 64 (SIGRTMAX) cannot be used: settings take signals 1 to 63";
  }
  return "unknown signal";
}

// One signal by name or number; "0" means none.
void env_signal(const char* var, int* out) {
  const char* v = secure_getenv(var);
  if (!v || !*v) return;
  if (str_eq(v, "0")) {
    *out = 0;
    return;
  }
  int s = parse_signal(v);
  if (s == SIGKILL || s == SIGSTOP) return warn_bad(var, v, "this signal cannot be caught");
  if (s <= 0) return warn_bad(var, v, unknown_signal_reason(v));
  *out = s;
}

unsigned long long default_signals() {
  unsigned long long mask = 0;
  for (int i = 0; i < kFatalSignalCount; ++i) mask |= 1ull << kFatalSignals[i];
  return mask;
}

// "SEGV,ABRT" or "SIGSEGV ABRT 7". Unknown names make the whole value bad.
void env_signals(const char* var, unsigned long long* out) {
  const char* v = secure_getenv(var);
  if (!v || !*v) return;
  unsigned long long mask = 0;
  char word[32];
  size_t len = 0;
  for (const char* p = v;; ++p) {
    if (*p == ',' || *p == ' ' || *p == '\0') {
      if (len) {
        word[len] = '\0';
        int s = parse_signal(word);
        if (s == SIGKILL || s == SIGSTOP) {
          return warn_bad(var, v, "SIGKILL and SIGSTOP cannot be caught");
        }
        if (s <= 0) return warn_bad(var, v, unknown_signal_reason(word));
        mask |= 1ull << s;
        len = 0;
      }
      if (!*p) break;
    } else if (len + 1 < sizeof word) {
      word[len++] = *p;
    }
  }
  if (!mask) return warn_bad(var, v, "no signal named");
  *out = mask;
}

// Settings whose signals collide break faultline: a thread signal that is
// also a fatal one spins forever after the report; a dump signal that is
// fatal (or the thread signal) writes dumps in a loop or loses the other
// threads' stacks. The setting that was given is refused with a warning and
// its default kept.
void resolve_signal_conflicts(faultline_options* opts, int default_dump) {
  const int default_thread = SIGRTMAX - 3;
  auto in_signals = [&](int s) { return s > 0 && s < 64 && ((opts->signals >> s) & 1); };
  // SIGALRM is the watchdog's (a process-directed alarm during a crash's
  // capture, whose handler replaces the signal's for that time): as the
  // thread signal no thread could answer. (A live dump arms no watchdog: a
  // dump signal may be SIGALRM.)
  if (opts->watchdog_seconds > 0 && opts->thread_signal == SIGALRM) {
    warn_bad("FAULTLINE_THREAD_SIGNAL", secure_getenv("FAULTLINE_THREAD_SIGNAL"),
             "the watchdog uses it; FAULTLINE_WATCHDOG=0 turns the watchdog off");
    opts->thread_signal = default_thread;
  }
  // A handled signal that is the thread signal: whichever was set is wrong.
  if (in_signals(opts->thread_signal)) {
    if (opts->thread_signal != default_thread) {
      warn_bad("FAULTLINE_THREAD_SIGNAL", secure_getenv("FAULTLINE_THREAD_SIGNAL"),
               "it is one of the fatal signals handled");
      opts->thread_signal = default_thread;
    } else {
      warn_bad("FAULTLINE_SIGNALS", secure_getenv("FAULTLINE_SIGNALS"),
               "it includes the thread signal");
      opts->signals = default_signals();
    }
  }
  // A thread signal of 0 is none (only the crashing thread's stack), as a
  // dump signal of 0 is: two zeros do not collide. A thread signal that was
  // set to the dump signal goes back to its default; a dump signal set to
  // the default thread signal is refused below (FAULTLINE_SIGNALS is not
  // the culprit then, and is kept).
  if (opts->thread_signal > 0 && opts->thread_signal == opts->dump_signal &&
      opts->thread_signal != default_thread) {
    warn_bad("FAULTLINE_THREAD_SIGNAL", secure_getenv("FAULTLINE_THREAD_SIGNAL"),
             "it is the dump signal");
    opts->thread_signal = default_thread;
  }
  if (opts->dump_signal > 0 &&
      (in_signals(opts->dump_signal) || opts->dump_signal == opts->thread_signal)) {
    warn_bad("FAULTLINE_DUMP_SIGNAL", secure_getenv("FAULTLINE_DUMP_SIGNAL"),
             in_signals(opts->dump_signal) ? "it is one of the fatal signals handled"
                                           : "it is the thread signal");
    opts->dump_signal = default_dump;
  }
}

}  // namespace

void warn_bad(const char* var, const char* value, const char* why) {
  raw_log("faultline: ignoring ", var, "=", value ? value : "");
  raw_log(" (", why, "); using the default\n");
}

void env_bool(const char* var, int* out) {
  const char* v = secure_getenv(var);
  if (!v || !*v) return;
  if (str_eq(v, "1") || str_eq(v, "yes") || str_eq(v, "true") || str_eq(v, "on")) {
    *out = 1;
  } else if (str_eq(v, "0") || str_eq(v, "no") || str_eq(v, "false") || str_eq(v, "off")) {
    *out = 0;
  } else {
    warn_bad(var, v, "expected 0 or 1");
  }
}

void read_scrub_settings(Config* cfg) {
  int scrub = 1;
  env_bool("FAULTLINE_SCRUB", &scrub);
  cfg->keep_secrets = scrub == 0;
  const char* keys = secure_getenv("FAULTLINE_SCRUB_KEYS");
  str_copy(cfg->scrub_keys, sizeof cfg->scrub_keys, keys ? keys : "");
}

namespace {

// "COUNT/SECONDS": COUNT 1 to 1000000, SECONDS 1 to a year.
bool parse_same_crash_limit(const char* v, int64_t* count, int64_t* seconds) {
  const char* slash = str_find(v, str_len(v), "/");
  if (!slash) return false;
  char head[24] = "";
  size_t n = static_cast<size_t>(slash - v);
  if (n >= sizeof head) return false;
  str_copy_n(head, sizeof head, v, n);
  return parse_int(head, count) && parse_int(slash + 1, seconds) && *count >= 1 &&
         *count <= 1000000 && *seconds >= 1 && *seconds <= 365 * 86400;
}

}  // namespace

void read_crash_limits(Config* cfg) {
  cfg->same_crash_count = 10;
  cfg->same_crash_seconds = 3600;
  const char* v = secure_getenv("FAULTLINE_SAME_CRASH_LIMIT");
  int64_t count = 0, seconds = 0;
  if (v && str_eq(v, "0")) {
    cfg->same_crash_count = 0;
  } else if (v && *v && !parse_same_crash_limit(v, &count, &seconds)) {
    warn_bad("FAULTLINE_SAME_CRASH_LIMIT", v,
             "expected COUNT/SECONDS (COUNT 1 to 1000000, SECONDS 1 to 31536000) or 0");
  } else if (v && *v) {
    cfg->same_crash_count = static_cast<int>(count);
    cfg->same_crash_seconds = static_cast<int>(seconds);
  }
  int64_t mb = 1024;
  env_int("FAULTLINE_DIR_LIMIT_MB", 0, int64_t{1} << 30, &mb);
  cfg->dir_limit_bytes = static_cast<uint64_t>(mb) << 20;
}

void options_defaults(faultline_options* opts) {
  *opts = faultline_options{};
  opts->size = sizeof *opts;
  // secure_getenv everywhere: under AT_SECURE (setuid, setgid, capabilities)
  // the caller's FAULTLINE_* variables are ignored (doc/security.md).
  opts->report_dir = secure_getenv("FAULTLINE_DIR");
  opts->signals = default_signals();
  opts->write_stderr = 1;
  opts->max_frames = kDefaultMaxFrames;
  opts->watchdog_seconds = kDefaultWatchdogSeconds;
  opts->arena_bytes = kDefaultArenaBytes;
  env_signals("FAULTLINE_SIGNALS", &opts->signals);
  env_bool("FAULTLINE_STDERR", &opts->write_stderr);
  int64_t v = opts->max_frames;
  env_int("FAULTLINE_MAX_FRAMES", 1, 10000, &v);
  opts->max_frames = static_cast<int>(v);
  v = opts->watchdog_seconds;
  env_int("FAULTLINE_WATCHDOG", 0, 3600, &v);
  opts->watchdog_seconds = static_cast<int>(v);
  v = static_cast<int64_t>(opts->arena_bytes >> 20);
  env_int("FAULTLINE_ARENA_MB", 1, 4096, &v);
  opts->arena_bytes = static_cast<size_t>(v) << 20;
  v = kDefaultMaxThreads;
  env_int("FAULTLINE_MAX_THREADS", 1, kMaxThreads - 1, &v);
  opts->max_threads = static_cast<int>(v);
  opts->thread_signal = SIGRTMAX - 3;
  env_signal("FAULTLINE_THREAD_SIGNAL", &opts->thread_signal);
  v = 1000;
  env_int("FAULTLINE_THREAD_TIMEOUT_MS", 10, 60000, &v);
  opts->thread_timeout_ms = static_cast<int>(v);
  int dump = 0;
  env_bool("FAULTLINE_DUMP", &dump);
  opts->dump_signal = dump ? SIGUSR2 : 0;
  env_signal("FAULTLINE_DUMP_SIGNAL", &opts->dump_signal);
  v = 0;
  env_int("FAULTLINE_DUMP_AFTER", 0, 365 * 86400, &v);
  opts->dump_after_seconds = static_cast<int>(v);
  env_bool("FAULTLINE_DUMP_AFTER_EXIT", &opts->exit_after_dump);
  opts->thread_altstacks = 1;
  env_bool("FAULTLINE_THREAD_ALTSTACKS", &opts->thread_altstacks);
  // On by default: a program that installs its own crash handler later
  // (PyTorch's DataLoader workers, redis) would otherwise take the crash
  // away without a report; its handler still runs first (chain_call.cpp).
  opts->stay_in_front = 1;
  env_bool("FAULTLINE_STAY_IN_FRONT", &opts->stay_in_front);
  // Off by default: at 64 threads it adds about half to the capture time
  // (bench/minidump_bench.py, README); on where the minidump is wanted.
  opts->minidump = 0;
  env_bool("FAULTLINE_MINIDUMP", &opts->minidump);
  resolve_signal_conflicts(opts, dump ? SIGUSR2 : 0);
}

// A deployment switch, like the unwinder: not a field of faultline_options.
void read_chain_order(Config* cfg) {
  cfg->chain_order = ChainOrder::kHandlerFirst;
  const char* v = secure_getenv("FAULTLINE_CHAIN_ORDER");
  if (!v || !*v || !strcmp(v, "auto") || !strcmp(v, "handler-first")) return;
  if (!strcmp(v, "report-first")) {
    cfg->chain_order = ChainOrder::kReportFirst;
  } else {
    warn_bad("FAULTLINE_CHAIN_ORDER", v, "expected auto, report-first or handler-first");
  }
}

}  // namespace faultline::install

namespace faultline::install {

// 0.1.0's struct, frozen: the fields of layout 1 without `size`.
struct OptionsV0 {
  const char* report_dir;
  unsigned long long signals;
  int write_stderr;
  int max_frames;
  int watchdog_seconds;
  size_t arena_bytes;
  int max_threads;
  int thread_signal;
  int thread_timeout_ms;
  int dump_signal;
  int dump_after_seconds;
  int exit_after_dump;
  int thread_altstacks;
  int stay_in_front;
  faultline_crash_callback callback;
  void* callback_data;
};
static_assert(sizeof(OptionsV0) == 88, "0.1.0's layout never changes");
static_assert(offsetof(faultline_options, report_dir) == sizeof(size_t) &&
                  offsetof(faultline_options, callback_data) ==
                      sizeof(size_t) + offsetof(OptionsV0, callback_data),
              "layout 1 is 0.1.0's fields after `size`");

// The struct 0.1.0's entry point last filled, read in 0.1.0's layout (its
// first word is 0.1.0's report_dir, a pointer or NULL, never a size). A
// copy of such a struct (a settings object handed out by value) is read so
// too once that entry point has run, if what it holds is plausible as
// 0.1.0's settings: a newer program's struct left uninitialised must still
// be refused, not read 8 bytes out of place.
const void* g_v0_struct = nullptr;

namespace {

// The sizes of the published layouts, oldest first; the last is this one's.
constexpr size_t kLayouts[] = {FAULTLINE_OPTIONS_SIZE_V1, FAULTLINE_OPTIONS_SIZE_V2};
static_assert(offsetof(faultline_options, minidump) == FAULTLINE_OPTIONS_SIZE_V1,
              "layout 2 starts where layout 1 ends");
constexpr size_t kLayoutCount = sizeof kLayouts / sizeof kLayouts[0];
static_assert(kLayouts[kLayoutCount - 1] == sizeof(faultline_options),
              "a field was added: publish FAULTLINE_OPTIONS_SIZE_Vn and list it here");
// A struct from a newer faultline.h may be bigger; past this it is no size.
constexpr size_t kMaxSize = 4096;

bool is_layout_size(size_t size) {
  for (size_t s : kLayouts) {
    if (size == s) return true;
  }
  return size > sizeof(faultline_options) && size <= kMaxSize;
}

void refuse_size(const char* function, size_t size, const char* why) {
  char n[24];
  n[core::fmt_dec(n, size)] = '\0';
  core::raw_log("faultline: ", function, ": faultline_options.size is ", n);
  core::raw_log(" (", why, ")\n");
}

bool plausible_v0(const OptionsV0& v) {
  auto flag = [](int x) { return x == 0 || x == 1; };
  return v.signals != 0 && (v.signals >> 32) == 0 && (v.signals & 1) == 0 && flag(v.write_stderr) &&
         flag(v.exit_after_dump) && flag(v.thread_altstacks) && flag(v.stay_in_front) &&
         v.max_frames >= 0 && v.watchdog_seconds >= 0 && v.max_threads >= 0 &&
         v.thread_timeout_ms >= 0 && v.dump_after_seconds >= 0 && v.thread_signal >= 0 &&
         v.thread_signal <= 64 && v.dump_signal >= 0 && v.dump_signal <= 64;
}

const char* kNotInitialised =
    "not the size of any layout of faultline_options: initialise the struct with "
    "faultline_options_init()";

}  // namespace

int options_init(faultline_options* opts, size_t size) {
  if (!opts || !is_layout_size(size)) {
    refuse_size("faultline_options_init", size, "not the size of any layout of faultline_options");
    return -EINVAL;
  }
  faultline_options all;
  options_defaults(&all);
  all.size = size;
  size_t known = size < sizeof all ? size : sizeof all;
  memcpy(opts, &all, known);
  // Fields of a newer faultline.h: zero, which the next library reads as unset.
  if (size > known) memset(reinterpret_cast<char*>(opts) + known, 0, size - known);
  return 0;
}

int options_from_caller(const faultline_options* in, faultline_options* out) {
  if (!in) {
    options_defaults(out);
    return 0;
  }
  size_t size = in->size;
  if (!is_layout_size(size)) {
    OptionsV0 v0;
    memcpy(&v0, in, sizeof v0);
    bool v0_copy = g_v0_struct && (size == 0 || size > kMaxSize) && plausible_v0(v0);
    if (in != g_v0_struct && !v0_copy) {
      refuse_size("faultline_install", size, kNotInitialised);
      return -EINVAL;
    }
    options_defaults(out);
    memcpy(reinterpret_cast<char*>(out) + sizeof(size_t), &v0, sizeof v0);
    return 0;
  }
  if (size > sizeof *out) {
    const char* tail = reinterpret_cast<const char*>(in) + sizeof *out;
    for (size_t i = 0; i < size - sizeof *out; ++i) {
      if (tail[i]) {
        refuse_size("faultline_install", size,
                    "set fields this library is too old to know; update libfaultline.so");
        return -E2BIG;
      }
    }
  }
  if (size < sizeof *out) options_defaults(out);
  memcpy(out, in, size < sizeof *out ? size : sizeof *out);
  out->size = sizeof *out;
  return 0;
}

}  // namespace faultline::install

// 0.1.0's faultline_options_init(), for programs built against it: it fills
// 0.1.0's smaller struct (no `size`) and remembers it for faultline_install().
// Programs built against a newer faultline.h call faultline_options_init_sized()
// through the macro of the same name.
#undef faultline_options_init
extern "C" FAULTLINE_API void faultline_options_init(faultline::install::OptionsV0* opts);

extern "C" {

int faultline_options_init_sized(faultline_options* opts, size_t size) {
  return faultline::install::options_init(opts, size);
}

void faultline_options_init(faultline::install::OptionsV0* opts) {
  if (!opts) return;
  faultline_options all;
  faultline::install::options_defaults(&all);
  memcpy(opts, reinterpret_cast<const char*>(&all) + sizeof(size_t), sizeof *opts);
  faultline::install::g_v0_struct = opts;
}

}  // extern "C"
