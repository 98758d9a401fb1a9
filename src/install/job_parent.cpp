#include "install/job_parent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/base/str.h"

namespace faultline::install {
namespace {

// Matches one "NAME=value" entry of a NUL-separated environment block that
// arrives in pieces.
struct EntryMatch {
  const char* want;  // "NAME=value"
  size_t len;
  size_t at = 0;      // bytes of the current entry matched so far
  bool still = true;  // the current entry matches `want` up to `at`
  bool found = false;

  void feed(char c) {
    if (c == '\0') {
      if (still && at == len) found = true;
      at = 0;
      still = true;
    } else if (still && at < len && want[at] == c) {
      ++at;
    } else {
      still = false;
    }
  }
};

// "NAME=value" into `out` (size `n`); false when it does not fit.
bool entry(char* out, size_t n, const char* name, const char* value) {
  size_t used = core::str_copy(out, n, name);
  return used + core::str_copy(out + used, n - used, value) ==
         core::str_len(name) + core::str_len(value);
}

}  // namespace

bool parent_in_same_job() {
  const char* run_id = secure_getenv("TORCHELASTIC_RUN_ID");
  const char* rank = secure_getenv("RANK");
  if (!run_id || !*run_id) return false;
  char want_run[512], want_rank[64];
  if (!entry(want_run, sizeof want_run, "TORCHELASTIC_RUN_ID=", run_id) ||
      !entry(want_rank, sizeof want_rank, "RANK=", rank ? rank : "")) {
    return false;
  }
  pid_t parent = getppid();
  if (parent <= 1) return false;  // outside this pid namespace, or orphaned
  char path[40] = "/proc/";
  size_t n = 6 + core::fmt_dec(path + 6, static_cast<uint64_t>(parent));
  core::str_copy(path + n, sizeof path - n, "/environ");
  int saved_errno = errno;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  EntryMatch same_run{want_run, core::str_len(want_run)};
  EntryMatch same_rank{want_rank, core::str_len(want_rank)};
  // A rank without RANK (a launcher that sets only the run id): the run id
  // alone decides.
  same_rank.found = !rank;
  if (fd >= 0) {
    char buf[4096];
    ssize_t got;
    while (!(same_run.found && same_rank.found) &&
           ((got = read(fd, buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR))) {
      for (ssize_t i = 0; i < got; ++i) {
        same_run.feed(buf[i]);
        same_rank.feed(buf[i]);
      }
    }
    close(fd);
  }
  errno = saved_errno;
  return same_run.found && same_rank.found;
}

}  // namespace faultline::install
