#include "report/sentry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>

#include "report/job.h"
#include "report/render.h"
#include "report/triage.h"

namespace faultline::report {

using nlohmann::json;

namespace {

bool is_hex(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

uint64_t parse_hex(const std::string& s) {
  try {
    return std::stoull(s, nullptr, 16);
  } catch (const std::exception&) {
    return 0;
  }
}

// Libraries of the system and installed Python packages are not the user's code.
bool in_app(const Frame& f) {
  const std::string& path = f.is_python() ? f.file : f.module;
  if (path.empty()) return false;
  for (const char* prefix : {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/"}) {
    if (path.rfind(prefix, 0) == 0) return false;
  }
  if (path.find("/site-packages/") != std::string::npos ||
      path.find("/dist-packages/") != std::string::npos ||
      path.find("/lib/python3") != std::string::npos ||
      basename(path).rfind("libfaultline", 0) == 0) {
    return false;
  }
  return f.origin == "python" || f.origin == "native";
}

json sentry_frame(const Frame& f) {
  json out = json::object();
  if (f.is_python()) {
    out["platform"] = "python";
    if (!f.file.empty()) {
      out["filename"] = f.file;
      out["abs_path"] = f.file;
    }
    if (f.line) out["lineno"] = *f.line;
    if (!f.function.empty()) out["function"] = f.qualname.empty() ? f.function : f.qualname;
  } else {
    out["platform"] = "native";
    if (!f.pc.empty()) out["instruction_addr"] = f.pc;
    if (!f.module.empty()) out["package"] = f.module;
    if (!f.symbol.empty()) {
      out["symbol"] = f.symbol;
      out["function"] = demangle(f.symbol);
      if (f.symbol_offset.size() > 2 && f.pc.size() > 2) {
        uint64_t pc = parse_hex(f.pc.substr(2));
        uint64_t off = parse_hex(f.symbol_offset.substr(2));
        if (off <= pc) out["symbol_addr"] = fmt::format("0x{:x}", pc - off);
      }
    } else if (!f.function.empty()) {
      out["function"] = f.function;  // a tail call's function, from DWARF
    }
    if (!f.file.empty()) out["filename"] = f.file;
    if (!f.file.empty() && f.line) out["lineno"] = *f.line;
  }
  out["in_app"] = in_app(f);
  // Not on the stack: rebuilt by `faultline symbolize` from call-site records.
  if (f.tail_call) out["data"] = json{{"tail_call", true}};
  return out;
}

// Sentry lists frames oldest first; reports list them innermost first.
json sentry_stacktrace(const Thread& t) {
  json frames = json::array();
  for (auto it = t.frames.rbegin(); it != t.frames.rend(); ++it) {
    for (auto tc = it->tail_calls.rbegin(); tc != it->tail_calls.rend(); ++tc)
      frames.push_back(sentry_frame(*tc));
    frames.push_back(sentry_frame(*it));
  }
  return json{{"frames", frames}};
}

// A stable event id (32 hex digits) derived from the report's contents, so
// sending the same report twice is deduplicated by Sentry.
std::string event_id(const Report& r) {
  std::string text = r.raw.dump();
  return fmt::format("{:016x}{:016x}", fnv1a64(text), fnv1a64(text, 0x84222325cbf29ce4ull));
}

// A report breadcrumb ({"time", "message"}; older reports and other
// writers may say "timestamp") as a Sentry breadcrumb, whose fields are fixed:
// the time goes to "timestamp", any other field to "data".
json sentry_breadcrumb(const json& b) {
  json out = {{"type", "default"}, {"category", "faultline"}};
  if (!b.is_object()) {
    out["message"] = b.is_string() ? b.get<std::string>() : b.dump();
    return out;
  }
  json data = json::object();
  for (const auto& [k, v] : b.items()) {
    if ((k == "time" || k == "timestamp") && (v.is_string() || v.is_number())) {
      out["timestamp"] = v;
    } else if (k == "message" && v.is_string()) {
      out["message"] = v;
    } else {
      data[k] = v;
    }
  }
  if (!data.empty()) out["data"] = data;
  return out;
}

}  // namespace

std::string sentry_debug_id(const std::string& build_id) {
  if (!is_hex(build_id) || build_id.size() % 2 != 0) return "";
  unsigned char b[16] = {0};
  for (size_t i = 0; i < 16 && 2 * i + 1 < build_id.size(); ++i) {
    b[i] = static_cast<unsigned char>(parse_hex(build_id.substr(2 * i, 2)));
  }
  std::reverse(b, b + 4);
  std::reverse(b + 4, b + 6);
  std::reverse(b + 6, b + 8);
  std::string hex;
  for (unsigned char c : b) hex += fmt::format("{:02x}", c);
  return fmt::format("{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4),
                     hex.substr(16, 4), hex.substr(20));
}

json sentry_event(const Report& r) {
  json ev = json::object();
  ev["event_id"] = event_id(r);
  // Without a timestamp in the report Sentry uses the time it receives the
  // event; inventing one here would make the output differ from run to run.
  if (!r.timestamp.empty()) ev["timestamp"] = r.timestamp;
  ev["platform"] = "native";
  ev["level"] = r.kind == "dump" ? "info" : "fatal";
  ev["logger"] = "faultline";
  if (!r.process.hostname.empty()) ev["server_name"] = r.process.hostname;
  ev["sdk"] = {{"name", "faultline"},
               {"version", r.faultline_version.empty() ? "unknown" : r.faultline_version}};

  const Thread* crashed = r.crashed_thread();
  std::string signature = report_signature(r);
  if (r.kind != "dump") {
    json mechanism = {{"type", "signalhandler"}, {"handled", false}, {"synthetic", true}};
    json sig = json::object();
    if (r.signal.number) sig["number"] = *r.signal.number;
    if (r.signal.code) sig["code"] = *r.signal.code;
    if (!r.signal.name.empty()) sig["name"] = r.signal.name;
    if (!r.signal.code_name.empty()) sig["code_name"] = r.signal.code_name;
    mechanism["meta"] = {{"signal", sig}};
    if (!r.signal.fault_address.empty()) {
      mechanism["data"] = {{"fault_address", r.signal.fault_address}};
    }
    json exc = {{"type", r.signal.name.empty() ? "crash" : r.signal.name},
                {"value", r.diagnosis.summary.empty() ? r.signal.description : r.diagnosis.summary},
                {"mechanism", mechanism}};
    if (crashed) {
      if (crashed->tid) exc["thread_id"] = *crashed->tid;
      exc["stacktrace"] = sentry_stacktrace(*crashed);
      // Registers of the crashed thread (hex strings), for Sentry's native view.
      if (crashed->raw && crashed->raw->contains("registers") &&
          (*crashed->raw)["registers"].is_object()) {
        json regs = json::object();
        for (const auto& [k, v] : (*crashed->raw)["registers"].items()) {
          if (v.is_string()) regs[k] = v;
        }
        exc["stacktrace"]["registers"] = regs;
      }
    }
    ev["exception"] = {{"values", json::array({exc})}};
  } else {
    // "logentry" is the event's message in Sentry's schema ("message" is
    // only a legacy alias there).
    ev["logentry"] = {
        {"formatted",
         fmt::format("faultline dump of process {}: {}",
                     r.process.pid ? std::to_string(*r.process.pid) : "?", r.diagnosis.summary)}};
  }

  json threads = json::array();
  for (const Thread& t : r.threads) {
    json th = json::object();
    if (t.tid) th["id"] = *t.tid;
    if (!t.name.empty()) th["name"] = t.name;
    th["crashed"] = t.crashed;
    th["current"] = &t == crashed;
    // Sentry: the crashed thread's stack lives in the exception, not twice.
    if (!(&t == crashed && r.kind != "dump")) th["stacktrace"] = sentry_stacktrace(t);
    threads.push_back(th);
  }
  ev["threads"] = {{"values", threads}};

  json images = json::array();
  json without_build_id = json::array();
  for (const Module& m : r.modules) {
    std::string debug_id = sentry_debug_id(m.build_id);
    if (debug_id.empty()) {
      without_build_id.push_back(m.path);
      continue;
    }
    json img = {{"type", "elf"},
                {"code_id", m.build_id},
                {"debug_id", debug_id},
                {"code_file", m.path},
                {"image_addr", m.base.empty() ? "0x0" : m.base},
                {"arch", r.process.arch == "aarch64" ? "arm64" : "x86_64"}};
    if (m.size) img["image_size"] = *m.size;
    // Non-PIE executables are linked at their load address: tell Sentry.
    if (m.load_bias.size() > 2 && m.base.size() > 2) {
      uint64_t base = parse_hex(m.base.substr(2)), bias = parse_hex(m.load_bias.substr(2));
      if (base > bias) img["image_vmaddr"] = fmt::format("0x{:x}", base - bias);
    }
    images.push_back(img);
  }
  ev["debug_meta"] = {{"images", images}};

  json contexts = {{"os", {{"type", "os"}, {"name", "Linux"}}}};
  if (r.python) {
    contexts["runtime"] = {
        {"type", "runtime"},
        {"name", r.python->implementation == "cpython" ? "CPython" : r.python->implementation},
        {"version", r.python->version}};
  }
  json process = {{"type", "default"}};
  if (r.process.pid) process["pid"] = *r.process.pid;
  if (!r.process.executable.empty()) process["executable"] = r.process.executable;
  if (!r.process.argv.empty()) process["argv"] = r.process.argv;
  if (!r.process.cwd.empty()) process["cwd"] = r.process.cwd;
  contexts["process"] = process;
  ev["contexts"] = contexts;

  json tags = {{"faultline.kind", r.kind.empty() ? "unknown" : r.kind},
               {"faultline.signature", signature}};
  if (!r.diagnosis.category.empty()) tags["faultline.category"] = r.diagnosis.category;
  if (!r.signal.name.empty()) tags["signal"] = r.signal.name;
  add_job_tags(r, tags);  // job.run_id, job.rank, ... under torchrun
  ev["tags"] = tags;
  // Group in Sentry exactly as `faultline triage` groups.
  ev["fingerprint"] = json::array({"faultline", signature});

  json extra = json::object();
  if (!r.path.empty()) extra["faultline_report"] = r.path;
  if (!r.errors.empty()) extra["capture_errors"] = r.errors;
  if (!without_build_id.empty()) extra["modules_without_build_id"] = without_build_id;
  if (r.raw.contains("annotations") && r.raw["annotations"].is_object() &&
      !r.raw["annotations"].empty()) {
    extra["annotations"] = r.raw["annotations"];
  }
  if (!extra.empty()) ev["extra"] = extra;
  if (r.raw.contains("breadcrumbs") && r.raw["breadcrumbs"].is_array() &&
      !r.raw["breadcrumbs"].empty()) {
    json crumbs = json::array();
    for (const json& b : r.raw["breadcrumbs"]) crumbs.push_back(sentry_breadcrumb(b));
    ev["breadcrumbs"] = {{"values", crumbs}};
  }
  return ev;
}

std::string sentry_envelope(const Report& r) {
  json ev = sentry_event(r);
  std::string payload = ev.dump();
  json header = {{"event_id", ev["event_id"]}};
  json item = {{"type", "event"}, {"length", payload.size()}, {"content_type", "application/json"}};
  return header.dump() + "\n" + item.dump() + "\n" + payload + "\n";
}

}  // namespace faultline::report
