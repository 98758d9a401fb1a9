// faultline dump by ptrace: a live report of another process captured from
// outside it, with no signal sent and no library needed in it.
//
// Every thread is stopped in a ptrace stop (cli/ptrace_stop.h), its
// registers read (PTRACE_GETREGSET, NT_PRSTATUS), its stack unwound from the
// modules' unwind tables (libunwind's remote unwinder, memory read with
// process_vm_readv), and let go; the report is the same "dump" report the
// library writes, with "capture": "ptrace".
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

namespace faultline::cli {

// Captures process pid into *report. 0 on success; else the errno of the
// refusal (EPERM: ptrace not allowed; ESRCH: the process is gone) with *why
// saying what failed. The threads are always let go before it returns.
int ptrace_capture(pid_t pid, nlohmann::json* report, std::string* why);

}  // namespace faultline::cli
