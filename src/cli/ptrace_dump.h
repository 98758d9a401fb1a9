// faultline dump by ptrace: a live report of another process captured from
// outside it, with no signal sent and no library needed in it.
//
// Every thread is stopped in a ptrace stop (cli/ptrace_stop.h), its
// registers read (PTRACE_GETREGSET, NT_PRSTATUS), its stack unwound by the
// crash path's own unwinder (cli/remote_stack.h: the CFI unwinder, the
// frame-pointer chain where it stops, memory read with process_vm_readv),
// and let go before anything is symbolized or written; the report is the
// same "dump" report the library writes, with "capture": "ptrace".
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

namespace faultline::cli {

// Captures process pid into *report. 0 on success; else the errno of the
// refusal (EPERM: ptrace not allowed; ESRCH: the process is gone) with *why
// saying what failed. The threads are always let go before it returns. A
// thread that does not stop with the others within 1 s is captured alone if
// it stops within wait_ms of the start, else left out (and never stopped).
int ptrace_capture(pid_t pid, nlohmann::json* report, std::string* why, int wait_ms = 10000);

}  // namespace faultline::cli
