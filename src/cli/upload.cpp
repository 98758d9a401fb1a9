// Sentry delivery (see upload.h).
#include "cli/upload.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "cli/spool.h"
#include "report/report.h"
#include "report/sentry.h"

namespace faultline::cli::upload {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string stem_of(const std::string& report_path) {
  std::string name = fs::path(report_path).filename().string();
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0)
    name.resize(name.size() - 5);
  return name;
}

bool file_exists(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string item(const json& header, const std::string& payload) {
  return header.dump() + "\n" + payload + "\n";
}

std::string attachment(const std::string& filename, const char* type, const char* content_type,
                       const std::string& payload) {
  return item({{"type", "attachment"},
               {"length", payload.size()},
               {"filename", filename},
               {"attachment_type", type},
               {"content_type", content_type}},
              payload);
}

struct Reply {
  long status = 0;          // HTTP status, 0 when no reply
  std::string error;        // transport error
  std::string body;         // the reply's body (cut)
  double retry_after = -1;  // seconds, from Retry-After
};

size_t collect_body(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Reply*>(user);
  if (r->body.size() < 4096) r->body.append(data, std::min(size * n, 4096 - r->body.size()));
  return size * n;
}

size_t collect_header(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Reply*>(user);
  std::string line(data, size * n);
  const std::string key = "retry-after:";
  if (line.size() > key.size()) {
    std::string head = line.substr(0, key.size());
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head == key) r->retry_after = std::atof(line.c_str() + key.size());
  }
  return size * n;
}

constexpr long kMaxRedirects = 5;

Reply post(const Options& o, const std::string& body) {
  Reply r;
  CURL* curl = curl_easy_init();
  if (!curl) {
    r.error = "libcurl could not start";
    return r;
  }
  std::string url = o.dsn.envelope_url();
  std::string auth = "X-Sentry-Auth: " + o.dsn.auth_header("faultline/" FAULTLINE_VERSION);
  struct curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/x-sentry-envelope");
  headers = curl_slist_append(headers, auth.c_str());
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "faultline/" FAULTLINE_VERSION);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, o.timeout);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, std::min(o.timeout, 10L));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  // A proxy or a moved server may answer 3xx: followed a few times, still
  // as a POST of the same envelope (301 and 302 too), never to another
  // scheme than http or https.
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, kMaxRedirects);
  curl_easy_setopt(curl, CURLOPT_POSTREDIR, static_cast<long>(CURL_REDIR_POST_ALL));
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r);
  CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) {
    r.error = curl_easy_strerror(rc);
  } else {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return r;
}

enum class SendResult { kAccepted, kTransient, kRejected };

// One envelope, with retries on transport errors, 429 and 5xx.
SendResult send_with_retries(const Options& o, const std::string& body, const std::string& what,
                             std::string* last) {
  double delay = o.backoff;
  for (int attempt = 0;; ++attempt) {
    Reply r = post(o, body);
    if (r.error.empty() && r.status >= 200 && r.status < 300) return SendResult::kAccepted;
    // Refused for good: a 4xx other than 408 and 429. Anything else (a
    // transport error, 5xx, a redirect past the limit or without a place
    // to go) may pass: tried again later, never marked.
    bool transient =
        !r.error.empty() || r.status < 400 || r.status >= 500 || r.status == 408 || r.status == 429;
    *last = r.error.empty() ? fmt::format("HTTP {} {}", r.status, r.body) : r.error;
    if (!transient) return SendResult::kRejected;
    if (attempt >= o.retries) return SendResult::kTransient;
    double wait = delay;
    if (r.retry_after > wait) wait = std::min(r.retry_after, 300.0);
    if (!o.quiet) {
      fmt::print(stderr, "faultline: {}: {}; retrying in {:.1f} s\n", what, *last, wait);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    delay *= 2;
  }
}

// Sends the spooled envelope of `stem` and records the outcome.
Outcome send_spooled(const Options& o, const SpoolDir& spool, const std::string& stem,
                     const std::string& event_id) {
  std::string body, why;
  if (!spool.read(stem + ".envelope", &body, &why)) {
    fmt::print(stderr, "faultline: {}\n", why);
    return Outcome::kBadInput;
  }
  std::string last;
  SendResult s = send_with_retries(o, body, stem, &last);
  if (s == SendResult::kTransient) {
    if (!o.quiet)
      fmt::print(stderr, "faultline: {}: not sent ({}); kept in {}\n", stem, last, spool.path());
    return Outcome::kSpooled;
  }
  json marker = {{"event_id", event_id},
                 {"time", now_utc()},
                 {"dsn_host", o.dsn.host},
                 {"dsn", o.dsn.identity()}};
  if (s == SendResult::kRejected) marker["reply"] = last;
  std::string marker_name = stem + (s == SendResult::kAccepted ? ".sent" : ".rejected");
  if (!spool.write(marker_name, marker.dump() + "\n", &why)) {
    // The envelope stays spooled: sending it again is better than losing it.
    fmt::print(stderr, "faultline: {}\n", why);
    return Outcome::kSpooled;
  }
  spool.remove(stem + ".envelope");
  if (s == SendResult::kRejected) {
    fmt::print(stderr, "faultline: {}: the server refused it: {}\n", stem, last);
    return Outcome::kRejected;
  }
  if (!o.quiet) fmt::print(stderr, "faultline: sent {} (event {})\n", stem, event_id);
  return Outcome::kSent;
}

// Whether the marker `name` says this DSN refused the report: a refusal
// by another server (or an older marker that does not say whose) does not
// keep the report from this one.
bool rejected_by(const SpoolDir& spool, const std::string& name, const Dsn& dsn) {
  std::string text, why;
  if (!spool.has(name) || !spool.read(name, &text, &why, 1 << 20)) return false;
  json m = json::parse(text, nullptr, false);
  return m.is_object() && m.contains("dsn") && m["dsn"] == dsn.identity();
}

// The event id a spooled envelope's header names ("" if unreadable).
std::string envelope_event_id(const SpoolDir& spool, const std::string& name) {
  std::string text, why;
  if (!spool.read(name, &text, &why)) return "";
  json h = json::parse(text.substr(0, text.find('\n')), nullptr, false);
  return h.is_object() && h.contains("event_id") && h["event_id"].is_string()
             ? h["event_id"].get<std::string>()
             : "";
}

}  // namespace

std::string Dsn::envelope_url() const {
  return fmt::format("{}://{}{}/api/{}/envelope/", scheme, host, path, project);
}

std::string Dsn::identity() const {
  return fmt::format("{}://{}@{}{}/{}", scheme, public_key, host, path, project);
}

std::string Dsn::auth_header(const std::string& client) const {
  return fmt::format("Sentry sentry_version=7, sentry_client={}, sentry_key={}", client,
                     public_key);
}

std::optional<Dsn> parse_dsn(const std::string& text, std::string* why) {
  Dsn d;
  d.text = text;
  size_t colon = text.find("://");
  if (colon == std::string::npos) {
    *why = "a DSN looks like https://KEY@HOST/PROJECT";
    return std::nullopt;
  }
  d.scheme = text.substr(0, colon);
  if (d.scheme != "http" && d.scheme != "https") {
    *why = fmt::format("unsupported scheme \"{}\" (http or https)", d.scheme);
    return std::nullopt;
  }
  std::string rest = text.substr(colon + 3);
  size_t at = rest.find('@');
  size_t slash = rest.find('/');
  if (at == std::string::npos || (slash != std::string::npos && at > slash) || at == 0) {
    *why = "the DSN has no public key (https://KEY@HOST/PROJECT)";
    return std::nullopt;
  }
  d.public_key = rest.substr(0, at);
  if (size_t c = d.public_key.find(':'); c != std::string::npos) d.public_key.resize(c);
  rest = rest.substr(at + 1);
  slash = rest.find('/');
  if (slash == std::string::npos || slash == 0) {
    *why = "the DSN has no project id (https://KEY@HOST/PROJECT)";
    return std::nullopt;
  }
  d.host = rest.substr(0, slash);
  std::string path = rest.substr(slash);  // "/.../PROJECT"
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t last = path.rfind('/');
  d.project = path.substr(last + 1);
  d.path = path.substr(0, last);
  if (d.project.empty() ||
      d.project.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz-_") != std::string::npos) {
    *why = fmt::format("bad project id \"{}\" in the DSN", d.project);
    return std::nullopt;
  }
  return d;
}

std::string spool_for(const Options& o, const std::string& report_path) {
  if (!o.spool.empty()) return o.spool;
  fs::path dir = fs::path(report_path).parent_path();
  return ((dir.empty() ? fs::path(".") : dir) / ".faultline-spool").string();
}

std::string build_envelope(const std::string& report_path, std::string* event_id) {
  std::string text = report::read_file(report_path);
  report::Report r = report::parse_report(text, report_path);
  json ev = report::sentry_event(r);
  *event_id = ev["event_id"].get<std::string>();
  std::string name = fs::path(report_path).filename().string();
  fs::path dir = fs::path(report_path).parent_path();
  // The minidump: the one the report names (in its directory), else the one
  // beside it with the same stem.
  std::string dump_name = report::string_field(r.raw, "minidump");
  if (dump_name.empty() || dump_name.find('/') != std::string::npos)
    dump_name = stem_of(report_path) + ".dmp";
  std::string dump_path = (dir / dump_name).string();

  std::string out = json{{"event_id", *event_id}}.dump() + "\n";
  std::string payload = ev.dump();
  out += item({{"type", "event"}, {"length", payload.size()}, {"content_type", "application/json"}},
              payload);
  if (file_exists(dump_path)) {
    std::string dump = report::read_file(dump_path);
    if (dump.size() >= 4 && dump.compare(0, 4, "MDMP") == 0) {
      out += attachment(dump_name, "event.minidump", "application/octet-stream", dump);
    }
  }
  out += attachment(name, "event.attachment", "application/json", text);
  return out;
}

Outcome upload_report(const Options& o, const std::string& report_path) {
  std::string stem = stem_of(report_path);
  SpoolDir spool;
  std::string why;
  if (!spool.open(spool_for(o, report_path), /*create=*/true, &why)) {
    fmt::print(stderr, "faultline: {}\n", why);
    return Outcome::kBadInput;
  }
  if (spool.has(stem + ".sent")) {
    if (!o.quiet) fmt::print(stderr, "faultline: {}: sent already\n", stem);
    return Outcome::kAlreadySent;
  }
  if (rejected_by(spool, stem + ".rejected", o.dsn)) {
    fmt::print(stderr, "faultline: {}: refused by the server before (see {}/{}.rejected)\n", stem,
               spool.path(), stem);
    return Outcome::kRejected;
  }
  const std::string env_name = stem + ".envelope";
  std::string event_id;
  if (!spool.has(env_name)) {
    std::string body;
    try {
      body = build_envelope(report_path, &event_id);
    } catch (const std::exception& e) {
      fmt::print(stderr, "faultline: {}\n", e.what());
      return Outcome::kBadInput;
    }
    if (!spool.write(env_name, body, &why)) {
      fmt::print(stderr, "faultline: spool {}: {}\n", spool.path(), why);
      return Outcome::kBadInput;
    }
  } else {
    event_id = envelope_event_id(spool, env_name);
  }
  return send_spooled(o, spool, stem, event_id);
}

int flush_spool(const Options& o, const std::string& spool_path) {
  // A spool that is missing or refused has nothing to send: uploading a
  // report into it says why.
  SpoolDir spool;
  std::string why;
  if (!spool.open(spool_path, /*create=*/false, &why)) return 0;
  int pending = 0;
  for (const std::string& stem : spool.stems(".envelope")) {
    if (spool.has(stem + ".sent")) {  // sent, then interrupted before the unlink
      spool.remove(stem + ".envelope");
      continue;
    }
    std::string id = envelope_event_id(spool, stem + ".envelope");
    if (send_spooled(o, spool, stem, id) == Outcome::kSpooled) ++pending;
  }
  return pending;
}

}  // namespace faultline::cli::upload
