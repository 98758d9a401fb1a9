#include "core/signal/fault_access.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/base/arch.h"

namespace faultline::core {
namespace {

// The kernel's PROCMAP_QUERY ioctl (Linux 6.11, include/uapi/linux/fs.h),
// declared here because older headers lack it.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaReadable = 1, kVmaWritable = 2, kVmaExecutable = 4;

enum class Lookup { kFound, kNone, kFailed };

Lookup query_ioctl(int fd, uint64_t addr, uint64_t* flags) {
  ProcmapQuery q = {};
  q.size = sizeof q;
  q.query_addr = addr;
  if (syscall(SYS_ioctl, fd, kProcmapQuery, &q) == 0) {
    *flags = q.vma_flags;
    return Lookup::kFound;
  }
  return errno == ENOENT ? Lookup::kNone : Lookup::kFailed;
}

bool parse_hex(const char** p, uint64_t* out) {
  uint64_t v = 0;
  const char* s = *p;
  int digits = 0;
  for (;; ++s, ++digits) {
    char c = *s;
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else {
      break;
    }
    if (digits == 16) return false;
    v = v << 4 | d;
  }
  *p = s;
  *out = v;
  return digits > 0;
}

// Parses "start-end perms ..." lines; `line` is NUL-terminated.
bool parse_line(const char* line, uint64_t* start, uint64_t* end, uint64_t* flags) {
  const char* p = line;
  if (!parse_hex(&p, start) || *p++ != '-' || !parse_hex(&p, end) || *p++ != ' ') return false;
  if (!p[0] || !p[1] || !p[2]) return false;
  *flags = (p[0] == 'r' ? kVmaReadable : 0) | (p[1] == 'w' ? kVmaWritable : 0) |
           (p[2] == 'x' ? kVmaExecutable : 0);
  return true;
}

// Checks one line against addr: kFound (flags set), kNone when the line is
// already past addr, kFailed to go on.
Lookup check_line(const char* line, uint64_t addr, uint64_t* flags) {
  uint64_t start, end, f;
  if (!parse_line(line, &start, &end, &f)) return Lookup::kFailed;
  if (addr < start) return Lookup::kNone;
  if (addr >= end) return Lookup::kFailed;
  *flags = f;
  return Lookup::kFound;
}

// The text of /proc/self/maps, a line at a time through a fixed buffer (the
// lines are in address order, so the walk stops at the first one past addr).
Lookup query_text(int fd, uint64_t addr, uint64_t* flags) {
  // Small: a program's own signal stack may be. A line's range and
  // protection are in its first 40 bytes; longer lines are cut.
  char buf[512];
  size_t have = 0;
  bool skipping = false;  // the rest of a line longer than the buffer
  for (;;) {
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Lookup::kFailed;
    have += static_cast<size_t>(n);
    buf[have] = '\0';
    size_t at = 0;
    for (;;) {
      size_t nl = at;
      while (nl < have && buf[nl] != '\n') ++nl;
      if (nl == have && n != 0) break;  // an unfinished line: read more
      buf[nl] = '\0';
      if (!skipping) {
        Lookup l = check_line(buf + at, addr, flags);
        if (l != Lookup::kFailed) return l;
      }
      skipping = false;
      if (nl >= have) return Lookup::kNone;  // end of file
      at = nl + 1;
    }
    if (at == 0 && have == sizeof buf - 1) {
      // One line fills the buffer (a path of nearly 4 KiB): its range is at
      // its start, so check it now and drop the rest of it.
      if (!skipping) {
        Lookup l = check_line(buf, addr, flags);
        if (l != Lookup::kFailed) return l;
      }
      skipping = true;
      have = 0;
      continue;
    }
    for (size_t i = at; i < have; ++i) buf[i - at] = buf[i];
    have -= at;
  }
}

int as_prot(Lookup l, uint64_t flags, int* prot) {
  if (l != Lookup::kFound) return l == Lookup::kNone ? 0 : -1;
  *prot = ((flags & kVmaReadable) ? PROT_READ : 0) | ((flags & kVmaWritable) ? PROT_WRITE : 0) |
          ((flags & kVmaExecutable) ? PROT_EXEC : 0);
  return 1;
}

}  // namespace

int maps_lookup_ioctl(int fd, uint64_t addr, int* prot) {
  uint64_t flags = 0;
  Lookup l = query_ioctl(fd, addr, &flags);
  return as_prot(l, flags, prot);
}

int maps_lookup_text(int fd, uint64_t addr, int* prot) {
  uint64_t flags = 0;
  Lookup l = query_text(fd, addr, &flags);
  return as_prot(l, flags, prot);
}

Access fault_access_now(int signo, const siginfo_t* info, const void* ucv) {
  if (signo != SIGSEGV || !info || !ucv) return Access::kUnknown;
  // Only a page fault the mapping's protection explains: not a general
  // protection fault (SI_KERNEL, no address), a protection key
  // (SEGV_PKUERR) or another cause the mapping does not show.
  if (info->si_code != SEGV_MAPERR && info->si_code != SEGV_ACCERR) return Access::kUnknown;
  PageFault pf = uc_page_fault(*static_cast<const ucontext_t*>(ucv));
  if (!pf.known) return Access::kUnknown;
  uint64_t need = pf.fetch ? kVmaExecutable : pf.write ? kVmaWritable : kVmaReadable;
  auto addr = reinterpret_cast<uint64_t>(info->si_addr);
  int saved = errno;
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) {
    errno = saved;
    return Access::kUnknown;
  }
  uint64_t flags = 0;
  Lookup found = query_ioctl(fd, addr, &flags);
  if (found == Lookup::kFailed) found = query_text(fd, addr, &flags);
  close(fd);
  errno = saved;
  if (found == Lookup::kFailed) return Access::kUnknown;
  return found == Lookup::kFound && (flags & need) ? Access::kPermitted : Access::kDenied;
}

}  // namespace faultline::core
