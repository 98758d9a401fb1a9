// The crash arena: the memory a capture writes into, mapped once at the
// first install so that the handler never allocates. Install time only.
#pragma once

#include <stddef.h>

namespace faultline::core {

// Maps g_crash.arena: `want` bytes, else the largest half of it down to
// 1 MiB that the address-space limit allows. False (said on stderr) when
// not even that could be mapped: crash reports are off.
bool init_arena(size_t want);

}  // namespace faultline::core
