// Whether a faulting memory access would succeed if retried now: the
// program's handler returned from a SIGSEGV with the pc unchanged, and the
// question is whether it made the access possible (a garbage collector's
// write barrier, Boehm-style: unprotect the page and return) or left it as
// it was (the retry faults again at once). Async-signal-safe.
#pragma once

#include <signal.h>
#include <stdint.h>

namespace faultline::core {

enum class Access {
  kPermitted,  // the mapping at the address allows the access now
  kDenied,     // no mapping there, or its protection still denies it
  kUnknown,    // not a kernel-sent SIGSEGV, or /proc could not be read
};

// Looks up the mapping that holds si_addr (PROCMAP_QUERY on /proc/self/maps
// where the kernel has it, else the text of /proc/self/maps) and checks its
// protection against the access the fault's error code names (read, write or
// instruction fetch). kUnknown for anything but a page fault (SEGV_MAPERR or
// SEGV_ACCERR) whose cause the protection can show: not a protection key,
// shadow stack or general-protection fault. The caller also needs the
// answer from before the handler ran for SEGV_MAPERR: a guard region
// (MADV_GUARD_INSTALL) faults inside a mapping that allows the access.
Access fault_access_now(int signo, const siginfo_t* info, const void* ucv);

// The two lookups, for tests: the protection of the mapping that holds addr,
// read from fd (an open /proc/self/maps, or a file in its format, at its
// start). Returns 1 and sets *prot (PROT_READ | PROT_WRITE | PROT_EXEC bits)
// when a mapping holds addr, 0 when none does, -1 when fd cannot be read so.
int maps_lookup_ioctl(int fd, uint64_t addr, int* prot);
int maps_lookup_text(int fd, uint64_t addr, int* prot);

}  // namespace faultline::core
