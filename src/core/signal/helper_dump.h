// A live dump captured from outside the process: the library starts the
// `faultline` command as a helper, allows that one process to trace it
// (prctl PR_SET_PTRACER), and waits while the helper stops every thread with
// ptrace, reads them and writes the report. No signal is sent to any thread,
// so no system call of the program fails with EINTR (a ptrace stop restarts
// it). The program never sees the helper: it is a child with no exit signal
// (no SIGCHLD; waitpid(-1) and wait() do not see it), started with only the
// descriptors it needs, reaped here with __WALL.
//
// Used by faultline_dump_now() (normal context, src/install/dump_helper.cpp)
// and by the dump-signal handler (handler.cpp): async-signal-safe, raw
// system calls only, no heap, no lock. The command is found at install time
// (helper_dump_set_command); where the dump cannot be made so (no command,
// ptrace refused by Yama, seccomp or a container, the helper failed, a crash
// arrived meanwhile) the caller falls back to the signal request and the
// report says why (report_writer.h).
#pragma once

#include <signal.h>
#include <stddef.h>

namespace faultline::core {

// The ptracer the program last declared with prctl(PR_SET_PTRACER) (0:
// none, the state a process starts in), remembered by the prctl()/syscall()
// interposers (src/install/seccomp_hook.cpp). A helper dump lets its helper
// trace the process for the dump only, then puts this one back. Linux has
// no call that reads it, so only a declaration made through libc's prctl()
// or syscall() is known.
extern volatile unsigned long g_program_ptracer;

// Install time (normal context): the command's absolute path, or nullptr and
// why there is none (a string that lives as long as the library).
void helper_dump_set_command(const char* cli, const char* missing);
// Whether helper_dump_set_command was called.
bool helper_dump_command_known();

// Asks the helper for a dump of this process. exec_mask: the signal mask the
// command starts with (nullptr: none blocked). in_handler: called from the
// dump-signal handler, which cannot wait for a helper dump this same thread
// asked for (it would wait for itself). true: it wrote the report
// (last_report_path() names it, dumps_written() counts it), or this thread's
// own helper dump, which the dump signal interrupted, is the answer. false:
// *why (NUL-terminated, at most why_size bytes) says why not. A crash that
// comes meanwhile ends the helper at once (the threads it stopped go on).
bool helper_dump(char* why, size_t why_size, const sigset_t* exec_mask, bool in_handler);

}  // namespace faultline::core
