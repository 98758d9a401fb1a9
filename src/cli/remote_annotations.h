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
#include <vector>

#include "core/frames.h"

namespace faultline::cli {

struct RemoteAppData {
  bool read = false;           // the tables were found and read
  std::string why;             // not read, though the process has faultline: why
  nlohmann::json annotations;  // {key: value}
  nlohmann::json breadcrumbs;  // [{"time", "message"}]
  std::map<pid_t, nlohmann::json> thread_annotations;  // by thread id: {key: value}
};

// Reads them from the process whose modules are `modules`, with its threads
// `tids` stopped by this tracer and the SafeReader pinned to it.
RemoteAppData read_remote_app_data(const core::ModuleTable& modules,
                                   const std::vector<pid_t>& tids);

}  // namespace faultline::cli
