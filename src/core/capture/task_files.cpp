#include "core/capture/task_files.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/base/safe_read.h"
#include "core/base/str.h"

namespace faultline::core {

// Reads /proc/self/task/<tid>/<file> into out; returns bytes read or -1.
long read_task_file(pid_t tid, const char* file, char* out, size_t cap) {
  char path[64];
  StrBuf p(path, sizeof path);
  p.add("/proc/self/task/").add_dec(tid).add("/").add(file);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long n = read(fd, out, cap - 1);
  close(fd);
  if (n < 0) return -1;
  out[n] = '\0';
  return n;
}

// The state letter from /proc/self/task/<tid>/stat ("R", "S", "D", ...).
char read_thread_state(pid_t tid) {
  char buf[512];
  if (read_task_file(tid, "stat", buf, sizeof buf) <= 0) return 0;
  // "tid (comm) S ..." where comm may contain spaces and parentheses.
  const char* close_paren = nullptr;
  for (const char* p = buf; *p; ++p) {
    if (*p == ')') close_paren = p;
  }
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}

namespace {

// Whether thread tid waits in sigwait()/sigwaitinfo()/sigtimedwait() for a
// set with signo in it: the kernel unblocks the waited signals for the
// wait's length, so SigBlk does not show them. /proc/self/task/<tid>/syscall
// names the call and its first argument, the set, read here.
bool waits_for_signal(pid_t tid, int signo) {
  char buf[128];
  if (read_task_file(tid, "syscall", buf, sizeof buf) <= 0) return false;
  const char* p = buf;
  int64_t nr = 0;
  while (*p >= '0' && *p <= '9') nr = nr * 10 + (*p++ - '0');
  if (p == buf || nr != SYS_rt_sigtimedwait || *p != ' ') return false;
  p += 3;  // " 0x"
  uint64_t set_at = 0;
  for (;; ++p) {
    int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
    if (v < 0) break;
    set_at = set_at << 4 | static_cast<uint64_t>(v);
  }
  uint64_t set = 0;
  return set_at && safe_read_obj(&set, static_cast<uintptr_t>(set_at)) && (set >> (signo - 1) & 1);
}

}  // namespace

// Whether thread tid blocks signo now: the SigBlk line of its
// /proc/self/task/<tid>/status, read in small pieces (an answering thread
// may be on a small signal stack). Unknown (unreadable) counts as not.
bool blocks_signal(pid_t tid, int signo) {
  char path[64];
  StrBuf p(path, sizeof path);
  p.add("/proc/self/task/").add_dec(tid).add("/status");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  static const char kKey[] = "\nSigBlk:\t";
  constexpr int kKeyLen = sizeof kKey - 1;
  int matched = 0;  // of kKey; then kKeyLen + digits of the hex mask read
  uint64_t mask = 0;
  bool found = false, done = false;
  char buf[256];
  while (!done) {
    long n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long i = 0; i < n && !done; ++i) {
      char c = buf[i];
      if (matched < kKeyLen) {
        matched = c == kKey[matched] ? matched + 1 : (c == '\n' ? 1 : 0);
        continue;
      }
      int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (v < 0) {
        found = true;
        done = true;
      } else {
        mask = mask << 4 | static_cast<uint64_t>(v);
      }
    }
  }
  close(fd);
  if (signo <= 0 || signo > 64) return false;
  if (found && (mask >> (signo - 1) & 1)) return true;
  return waits_for_signal(tid, signo);
}

}  // namespace faultline::core
