// What the application recorded in another process (its annotations, each
// thread's annotations, its breadcrumbs), for `faultline dump` by ptrace.
//
// The library exports where its tables are (faultline_remote_tables:
// core/capture/annotation_tables.h). The descriptor is found in the loaded
// image's own dynamic symbol table (never a file that may have been replaced
// since), checked against this build's (magic, version, every size), and
// the tables copied out of the stopped process through the SafeReader; the
// crash path's own snapshot code then reads the copies, so the report holds
// exactly what a signal dump's would. Nothing read is trusted: slots caught
// mid-write are skipped, strings cut at their buffers, counts clamped.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/capture/annotation_tables.h"
#include "core/frames.h"

namespace faultline::cli {

// The tables as copied out of the stopped process: the threads are let go
// before they are decoded.
struct RemoteTablesCopy {
  bool found = false;  // the descriptor was found, matched, and the tables copied
  std::string why;     // not found, though the process has faultline: why
  int annotations_limit = 0, probe_limit = 0;
  uint64_t crumb_next = 0;
  std::vector<core::GlobalSlot> annotations;
  std::vector<core::Crumb> crumbs;
  std::vector<core::ThreadTable> thread_tables;
  std::vector<std::pair<pid_t, uintptr_t>> threads;  // each stopped thread's id and thread pointer
};

// Copies them from the process whose modules are `modules`, with its
// threads `tids` stopped by this tracer and the SafeReader pinned to it.
RemoteTablesCopy copy_remote_tables(const core::ModuleTable& modules,
                                    const std::vector<pid_t>& tids);

struct RemoteAppData {
  nlohmann::json annotations;                          // {key: value}
  nlohmann::json breadcrumbs;                          // [{"time", "message"}]
  std::map<pid_t, nlohmann::json> thread_annotations;  // by thread id: {key: value}
};

// Decodes a copy (found) as the crash path does, as its report writes it.
RemoteAppData decode_remote_tables(const RemoteTablesCopy& copy);

}  // namespace faultline::cli
