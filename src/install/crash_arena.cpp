#include "install/crash_arena.h"

#include <errno.h>
#include <string.h>

#include "core/base/raw_log.h"
#include "core/base/str.h"
#include "core/crash_state.h"

namespace faultline::core {

// The crash arena: the size asked for, else, where an address-space limit
// (ulimit -v, a batch system's memory limit as RLIMIT_AS) refuses it, the
// largest half of it down to 1 MiB: a capture in a small arena loses what
// does not fit and says so, one without an arena is no report at all. Either
// way said on stderr at start: the preload ignores what install returns, so
// a refused arena was crash reports off without a word.
bool init_arena(size_t want) {
  auto why = [](int e) {
    const char* name = strerrorname_np(e);
    return name ? name : "?";
  };
  int err = 0;
  for (size_t bytes = want; bytes >= (size_t{1} << 20); bytes /= 2) {
    if (g_crash.arena.init(bytes)) {
      if (bytes != want) {
        char msg[160];
        StrBuf m(msg, sizeof msg);
        m.add("faultline: the crash arena of ").add_dec(static_cast<int64_t>(want >> 20));
        m.add(" MiB could not be mapped (").add(why(err));
        m.add(", ulimit -v?); using ").add_dec(static_cast<int64_t>(bytes >> 20)).add(" MiB\n");
        raw_log(msg);
      }
      return true;
    }
    err = errno;
  }
  raw_log("faultline: no crash arena could be mapped (", why(err),
          ", ulimit -v?): crash reports are off\n");
  return false;
}

}  // namespace faultline::core
