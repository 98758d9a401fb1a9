// Delivery of reports to Sentry: one envelope per report (the event from
// `faultline sentry`, the minidump as an `event.minidump` attachment, the JSON
// report as a plain attachment), POSTed with libcurl, retried with backoff,
// spooled when it cannot be sent, never sent twice.
//
// State lives in a spool directory (default: `.faultline-spool` in the
// report's directory):
//   <stem>.envelope   built and not yet accepted by the server
//   <stem>.sent       accepted (event id, time); the report is never sent again
//   <stem>.rejected   refused for good by the server of the DSN it names
//                     (status and reply); another DSN still gets it
// <stem> is the report's file name without `.json`; its minidump shares it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace faultline::cli::upload {

struct Dsn {
  std::string scheme;      // http | https
  std::string public_key;  // sentry_key
  std::string host;        // host[:port]
  std::string path;        // "" or "/prefix" (no trailing slash)
  std::string project;     // project id
  std::string text;        // as given
  std::string envelope_url() const;
  // The DSN without its secret part: what a refusal is remembered for.
  std::string identity() const;
  std::string auth_header(const std::string& client) const;  // X-Sentry-Auth's value
};

// Parses "{scheme}://{key}@{host}[:port]/[path/]{project}"; nullopt and `why` on error.
std::optional<Dsn> parse_dsn(const std::string& text, std::string* why);

struct Options {
  Dsn dsn;
  std::string spool;   // "" = <report dir>/.faultline-spool
  int retries = 3;     // attempts after the first one
  double backoff = 1;  // seconds before the first retry, doubled each time
  long timeout = 30;   // seconds per attempt
  bool quiet = false;
};

enum class Outcome { kSent, kAlreadySent, kSpooled, kRejected, kBadInput };

// The spool directory used for `report_path`.
std::string spool_for(const Options& o, const std::string& report_path);

// The envelope for one report file (reads the report and its minidump).
// Throws std::exception with a message on bad input.
std::string build_envelope(const std::string& report_path, std::string* event_id);

// Sends one report: skips it when its .sent marker exists, otherwise builds
// (or takes the spooled) envelope and sends it.
Outcome upload_report(const Options& o, const std::string& report_path);

// Sends every spooled envelope of `spool`; returns how many are still pending.
int flush_spool(const Options& o, const std::string& spool);

}  // namespace faultline::cli::upload
