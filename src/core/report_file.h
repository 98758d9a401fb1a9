// The report file: <dir>/.faultline-<time>-<pid>-<tid>[-<n>].json.tmp,
// written, fsync'd and renamed, so a reader never sees half a report. When
// no file can be made, the JSON goes to stderr between markers instead.
#pragma once

namespace faultline::core {

struct Capture;

// Writes c as the report file. With announce, also says on stderr where it
// went (announce_report). True when the file was written.
bool write_report(const Capture& c, bool announce);

// Says on stderr where the report went (when stderr output is on), or, when
// it could not be written, puts the whole report there between markers, so
// nothing is lost if stderr is kept.
void announce_report(const Capture& c, bool written);

// The path of the last report written ("" if none), and how many live dumps
// were written.
const char* last_report_path();
int dumps_written();

}  // namespace faultline::core
