// UTC time formatting without gmtime (not async-signal-safe): civil date from
// days since the epoch (Howard Hinnant's public-domain algorithm, re-derived).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace faultline::core {

// "2026-11-30T06:10:00.123Z" (24 chars + NUL; out must hold 32).
void format_iso8601(char* out, int64_t sec, int64_t nsec);
// "20261130T061000" (15 chars + NUL; out must hold 16).
void format_compact(char* out, int64_t sec);

}  // namespace faultline::core
