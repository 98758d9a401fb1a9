// faultline_options as a caller hands it over: one of the sized layouts
// (faultline.h), 0.1.0's unsized one, or NULL. Install time only.
#pragma once

#include <stddef.h>

#include "faultline/faultline.h"

namespace faultline::install {

// The defaults with the FAULTLINE_* variables applied, in this library's
// whole layout (install.cpp).
void options_defaults(faultline_options* opts);

// faultline_options_init_sized(): the defaults for the first `size` bytes.
int options_init(faultline_options* opts, size_t size);

// The caller's options in this library's layout: what the caller's size
// covers, the defaults for the rest. 0, or -EINVAL / -E2BIG with a message
// on the text descriptor.
int options_from_caller(const faultline_options* in, faultline_options* out);

}  // namespace faultline::install
