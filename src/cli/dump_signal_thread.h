// Where `faultline dump` sends the dump signal (--method signal, or its
// fallback when ptrace is refused): to one thread whose system call a
// handler's return restarts under SA_RESTART, rather than to the process,
// where the kernel may pick a thread waiting in poll, epoll_wait, nanosleep
// or select (never restarted after a handler: they fail with EINTR).
// faultline's dump handler then has the library's helper stop the others
// by ptrace, so no thread of the job sees EINTR at all.
#pragma once

#include <sys/types.h>

#include <string>

namespace faultline::cli {

// Sends sig to a thread of pid that neither blocks it nor waits in a system
// call that would fail with EINTR or return early: one in futex, wait4 or
// waitid first, else one in read (which a socket's receive timeout makes
// fail), else a running one; says on stderr which. Where there is none, or
// it cannot be told, to the process (kill). 0, or an errno.
int send_dump_signal(pid_t pid, int sig);

}  // namespace faultline::cli
