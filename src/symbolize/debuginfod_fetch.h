// Debug files from debuginfod servers (DEBUGINFOD_URLS) within one time
// budget for the whole run: a stalled server (one that accepts and never
// answers) would otherwise hold `faultline symbolize` for as long as
// libdebuginfod's per-transfer timeouts allow, module after module.
//
//   Debuginfod net(10.0);                // seconds, from the first fetch on
//   net.fetch({"ab12...", "cd34..."});   // concurrently; returns by the deadline
//   net.result("ab12...", &path, &why);  // the file, or why there is none
//
// A fetch still running at the deadline is cut off (and given up: the run
// goes on without it). Build-ids that got no answer (the budget ran out, the
// server failed) are remembered for a while in a marker file, as debuginfod
// clients remember the files a server does not have, so the next run does
// not wait for the same server again. Internal to the symbolizer.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace faultline::symbolize::internal {

class Debuginfod {
 public:
  struct Shared;  // what the fetching threads share with the run

  explicit Debuginfod(double budget_s);
  ~Debuginfod();
  Debuginfod(const Debuginfod&) = delete;
  Debuginfod& operator=(const Debuginfod&) = delete;

  // Fetches these build-ids' debug files, all at once, within what is left
  // of the run's budget; build-ids already answered are not asked again.
  void fetch(const std::vector<std::string>& build_ids);
  // True once fetch() answered `build_id`: *path is the file ("" when none),
  // *why says why there is none.
  bool result(const std::string& build_id, std::string* path, std::string* why);

  // While deferring, asks are collected instead of made (see Symbolizer).
  void set_deferring(bool on) { deferring_ = on; }
  bool deferring() const { return deferring_; }
  void defer(const std::string& build_id) { deferred_.push_back(build_id); }
  std::vector<std::string> take_deferred() { return std::move(deferred_); }

  // True when a fetch cut off at the deadline is still winding down.
  bool pending() const;

 private:
  std::shared_ptr<Shared> shared_;
  double budget_s_;
  bool started_ = false;
  double deadline_ = 0;  // CLOCK_MONOTONIC seconds
  bool deferring_ = false;
  std::vector<std::string> deferred_;
};

// Where the markers of build-ids that got no answer are kept, and for how
// long they hold (FAULTLINE_DEBUGINFOD_MISS_S, default 600 s).
std::string miss_cache_dir();

}  // namespace faultline::symbolize::internal
