// faultline_options as a caller hands it over: one of the sized layouts
// (faultline.h), 0.1.0's unsized one, or NULL; and the FAULTLINE_*
// variables that give the defaults and the deployment switches. Install
// time only: getenv and the like, never reachable from the handler.
#pragma once

#include <stddef.h>

#include "faultline/faultline.h"

namespace faultline::core {
struct Config;
}

namespace faultline::install {

// What a zero (unset) max_frames or max_threads of the C API means.
constexpr int kDefaultMaxFrames = 256;
constexpr int kDefaultMaxThreads = 256;

// The defaults with the FAULTLINE_* variables applied, in this library's
// whole layout.
void options_defaults(faultline_options* opts);

// Says on stderr that var=value is ignored, and why: a bad setting keeps
// its default rather than failing the program's start.
void warn_bad(const char* var, const char* value, const char* why);

// A yes/no variable (1, yes, true, on / 0, no, false, off); keeps *out
// when unset or bad.
void env_bool(const char* var, int* out);

// FAULTLINE_SCRUB=0 keeps argv verbatim; FAULTLINE_SCRUB_KEYS adds words.
void read_scrub_settings(core::Config* cfg);
// FAULTLINE_SAME_CRASH_LIMIT and FAULTLINE_DIR_LIMIT_MB (write/crash_limits.h).
void read_crash_limits(core::Config* cfg);

// FAULTLINE_CHAIN_ORDER: who runs first at a hardware fault when the
// program has its own handler behind faultline's (core/signal/chain.h).
void read_chain_order(core::Config* cfg);

// faultline_options_init_sized(): the defaults for the first `size` bytes.
int options_init(faultline_options* opts, size_t size);

// The caller's options in this library's layout: what the caller's size
// covers, the defaults for the rest. 0, or -EINVAL / -E2BIG with a message
// on the text descriptor.
int options_from_caller(const faultline_options* in, faultline_options* out);

}  // namespace faultline::install
