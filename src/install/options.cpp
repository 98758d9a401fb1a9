// The options struct across versions. It grows at its end; `size` says how
// much of it a caller knows. A caller built against an older faultline.h
// gets the defaults for the fields it lacks; one built against a newer
// faultline.h may pass a bigger struct as long as it sets nothing this
// library does not know (the rule of Linux's extensible syscall structs).
// 0.1.0's struct had no size: its programs still work through the 0.1.0
// entry point faultline_options_init(), below.
#include "install/options.h"

#include <errno.h>
#include <string.h>

#include "core/base/raw_log.h"
#include "core/base/str.h"

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
