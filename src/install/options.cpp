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

#include "core/raw_log.h"
#include "core/str.h"

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

// Set once 0.1.0's entry point has run: the process holds a program built
// against 0.1.0. faultline_install() then reads a struct whose first word is
// NULL or pointer-like (0.1.0's report_dir, never a size) in 0.1.0's layout,
// whether it is the struct that entry point filled or a copy of it.
bool g_v0_seen = false;

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
    if (!g_v0_seen || (size != 0 && size <= kMaxSize)) {
      refuse_size("faultline_install", size, kNotInitialised);
      return -EINVAL;
    }
    OptionsV0 v0;
    memcpy(&v0, in, sizeof v0);
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
  faultline::install::g_v0_seen = true;
}

}  // extern "C"
