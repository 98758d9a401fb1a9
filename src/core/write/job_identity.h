// Which distributed job a process belongs to: under torchrun
// (TORCHELASTIC_RUN_ID in the environment) every report carries a top-level
// "job" object, so that the reports of a job's ranks, from any number of
// hosts, can be put together again (`faultline job`, doc/torch.md).
//
// Use:
//   job_identity_init(first);  // install time (reads the environment)
//   ...
//   write_job(w);              // crash time, in the report writer
#pragma once

#include <stdlib.h>

#include "core/write/json_writer.h"

namespace faultline::core {

// What the launcher tells each worker, as found in the environment.
struct JobEnv {
  const char* run_id;         // TORCHELASTIC_RUN_ID: nullptr or "" for none
  const char* rank;           // RANK
  const char* local_rank;     // LOCAL_RANK
  const char* world_size;     // WORLD_SIZE
  const char* group_rank;     // GROUP_RANK
  const char* restart_count;  // TORCHELASTIC_RESTART_COUNT
  const char* master_addr;    // MASTER_ADDR
  const char* master_port;    // MASTER_PORT
};

// Install time: copies what `env` names (a second install replaces it).
// Not async-signal-safe with respect to a concurrent crash.
void job_identity_set(const JobEnv& env);

// Install time: reads the environment. Inline so that getenv is compiled
// into the install-time caller, never into the crash-path objects. `first`:
// the first install, which skips the copy when there is no job.
inline void job_identity_init(bool first = false) {
  // secure_getenv: under AT_SECURE a setuid program's caller does not get
  // to write into its reports (nothing is read then).
  JobEnv e{secure_getenv("TORCHELASTIC_RUN_ID"), secure_getenv("RANK"),
           secure_getenv("LOCAL_RANK"),          secure_getenv("WORLD_SIZE"),
           secure_getenv("GROUP_RANK"),          secure_getenv("TORCHELASTIC_RESTART_COUNT"),
           secure_getenv("MASTER_ADDR"),         secure_getenv("MASTER_PORT")};
  if (!first || (e.run_id && *e.run_id)) job_identity_set(e);
}

// True when the process runs under a launcher that gave it a job identity.
bool job_identity_present();

// Crash time, async-signal-safe: writes `"job": {...}` when present,
// nothing otherwise.
void write_job(JsonWriter& w);

}  // namespace faultline::core
