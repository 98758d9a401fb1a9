// The JSON report (schema faultline/1, doc/report-format.md), written from
// a capture straight to a file descriptor through a static buffer.
// Async-signal-safe.
#pragma once

namespace faultline::core {

struct Capture;
struct Config;

// Writes the JSON report to fd. False (and *err set to the errno) when a
// write failed.
bool write_json_report(const Capture& c, const Config& cfg, int fd, int* err);

// Why a live dump asked for inside the process is taken by signal and not
// by the ptrace helper (install/dump_helper.h); "" otherwise. A dump report
// written while it is set carries it as "capture_fallback".
extern char g_dump_by_signal_because[256];

}  // namespace faultline::core
