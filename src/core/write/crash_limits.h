// Limits under a crash loop (FAULTLINE_SAME_CRASH_LIMIT, FAULTLINE_DIR_LIMIT_MB),
// decided at crash time with the directory's own files: no heap, no locks.
//
// Same crash: a state file per signature in the report directory,
// `.faultline-limit-<signature>`, counts the reports written in the current
// window and the crashes suppressed since; past COUNT in SECONDS a crash
// report is not written, and the next one written says how many were not.
// Processes that crash at the same moment may each read the same count:
// a few more reports than COUNT may be written, never fewer, and nobody waits.
//
// Directory cap: after a report is published, faultline's files in the
// directory (faultline-*.json, faultline-*.dmp, ours, regular) are summed
// and the oldest removed while over the cap, never the report just written
// and never one an upload spool (<dir>/.faultline-spool) has not marked sent.
#pragma once

namespace faultline::core {

struct Capture;

// For a crash or terminate report: true when it is over the same-crash
// limit (counted, not to be written; its minidump is removed). Sets
// c->suppressed_count/since: with true, the crashes suppressed so far in
// this run of them, this one included; with false, those suppressed before
// this report (0 when none). Live dumps are never limited.
bool same_crash_suppressed(Capture* c);

// In place of announce_report for a suppressed crash: one line on stderr
// (when stderr output is on) with the count, the signature and the setting.
void announce_suppressed(const Capture& c);

// Removes the oldest faultline files while the directory is over its cap;
// `keep` (a file name in it, the report just written) stays.
void enforce_dir_limit(const char* keep);

}  // namespace faultline::core
