// What /proc/self/task/<tid>/ says of another thread of this process: a
// file's text, its state letter, and whether it blocks (or waits in
// sigwait() for) a signal. Raw open/read/close; async-signal-safe.
#pragma once

#include <stddef.h>
#include <sys/types.h>

namespace faultline::core {

// Reads /proc/self/task/<tid>/<file> into out (NUL-terminated); returns the
// bytes read or -1.
long read_task_file(pid_t tid, const char* file, char* out, size_t cap);

// The state letter from /proc/self/task/<tid>/stat ("R", "S", "D", ...); 0
// when unreadable.
char read_thread_state(pid_t tid);

// Whether thread tid would not take signo as faultline's request: it
// blocks it (SigBlk), or waits for it in sigwait() and its kin, which would
// return it to the program as its own.
bool blocks_signal(pid_t tid, int signo);

}  // namespace faultline::core
