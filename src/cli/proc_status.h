// The signal masks a thread's or process's /proc status file shows
// (SigBlk, SigIgn, SigCgt, ...), read by `faultline dump`'s checks.
#pragma once

#include <optional>
#include <string>

namespace faultline::cli {

// The hexadecimal mask on the line "FIELD:\t..." of the status file at path
// (/proc/PID/status, /proc/PID/task/TID/status); nullopt when the file, the
// line or the number cannot be read.
std::optional<unsigned long long> status_mask(const std::string& path, const char* field);

// Whether signal sig (1-64) is in mask.
inline bool has_signal(unsigned long long mask, int sig) {
  return sig >= 1 && sig <= 64 && ((mask >> (sig - 1)) & 1) != 0;
}

}  // namespace faultline::cli
