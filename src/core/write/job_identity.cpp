// The "job" object of a report (see job_identity.h). The environment is
// copied at install into static storage; the crash path only reads it.
#include "core/write/job_identity.h"

#include <sys/utsname.h>

#include "core/base/str.h"

namespace faultline::core {
namespace {

// A number the launcher gave as text: absent or not a number is null.
struct JobNumber {
  bool present;
  int64_t value;
};

struct JobIdentity {
  bool present;
  char run_id[256];
  char master_addr[256];
  JobNumber rank, local_rank, world_size, group_rank, restart_count, master_port;
};

JobIdentity g_job;

JobNumber parse_number(const char* s) {
  JobNumber n{};
  n.present = s && parse_int(s, &n.value);
  return n;
}

void field_number(JsonWriter& w, const char* key, const JobNumber& n) {
  w.key(key);
  if (n.present) {
    w.num(n.value);
  } else {
    w.null();
  }
}

}  // namespace

void job_identity_set(const JobEnv& env) {
  g_job = JobIdentity{};
  if (!env.run_id || !*env.run_id) return;
  str_copy_n(g_job.run_id, sizeof g_job.run_id, env.run_id, str_len(env.run_id));
  if (env.master_addr) {
    str_copy_n(g_job.master_addr, sizeof g_job.master_addr, env.master_addr,
               str_len(env.master_addr));
  }
  g_job.rank = parse_number(env.rank);
  g_job.local_rank = parse_number(env.local_rank);
  g_job.world_size = parse_number(env.world_size);
  g_job.group_rank = parse_number(env.group_rank);
  g_job.restart_count = parse_number(env.restart_count);
  g_job.master_port = parse_number(env.master_port);
  g_job.present = true;
}

bool job_identity_present() {
  return g_job.present;
}

void write_job(JsonWriter& w) {
  if (!g_job.present) return;
  w.key("job");
  w.begin_object();
  w.field_str("launcher", "torchrun");
  w.field_str("run_id", g_job.run_id);
  field_number(w, "rank", g_job.rank);
  field_number(w, "local_rank", g_job.local_rank);
  field_number(w, "world_size", g_job.world_size);
  field_number(w, "group_rank", g_job.group_rank);
  field_number(w, "restart_count", g_job.restart_count);
  // The host at crash time (a job's ranks are told apart by host and
  // local rank when RANK is missing).
  struct utsname u;
  w.key("host");
  if (uname(&u) == 0) {
    w.str(u.nodename);
  } else {
    w.null();
  }
  w.key("master_addr");
  if (g_job.master_addr[0]) {
    w.str(g_job.master_addr);
  } else {
    w.null();
  }
  field_number(w, "master_port", g_job.master_port);
  w.end_object();
}

}  // namespace faultline::core
