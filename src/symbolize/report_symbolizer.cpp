#include "symbolize/report_symbolizer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "symbolize/dwarf_index.h"
#include "symbolize/inductor_kernel_origins.h"

namespace faultline::symbolize {
namespace {

using Json = nlohmann::ordered_json;

// The fields this symbolizer owns on a native frame; they are replaced as a
// whole on every run, which keeps repeated runs from piling up.
constexpr const char* kFrameFields[] = {"function", "file",    "line",
                                        "column",   "inlined", "tail_calls"};
constexpr const char* kModuleFields[] = {"debug_source", "debug_file", "debug_error"};

std::string string_field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

bool bool_field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

bool address_field(const Json& obj, const char* key, uint64_t* value) {
  auto it = obj.find(key);
  if (it == obj.end()) return false;
  if (it->is_string()) return parse_address(it->get<std::string>(), value);
  if (it->is_number_unsigned()) {
    *value = it->get<uint64_t>();
    return true;
  }
  return false;
}

Json location_json(const SourceLocation& loc) {
  Json j = Json::object();
  if (!loc.function.empty()) j["function"] = loc.function;
  if (!loc.file.empty()) j["file"] = loc.file;
  if (loc.line > 0) j["line"] = loc.line;
  if (loc.column > 0) j["column"] = loc.column;
  return j;
}

// The real function's position on `obj`, and the inlined calls at it.
void put_location(Json& obj, const AddressInfo& info) {
  if (info.empty()) return;
  Json loc = location_json(info.frames.back());
  for (auto& [key, value] : loc.items()) obj[key] = value;
  if (info.frames.size() > 1) {
    Json inlined = Json::array();
    for (size_t i = 0; i + 1 < info.frames.size(); ++i)
      inlined.push_back(location_json(info.frames[i]));
    obj["inlined"] = std::move(inlined);
  }
}

struct PendingFrame {
  Json* frame;
  uint64_t address;  // already adjusted by the pc-1 rule
};

// A native frame in a thread's order, for the tail calls between neighbours.
struct ThreadFrame {
  Json* frame;
  std::string path;
  uint64_t address;  // as looked up (pc-1 rule applied)
  uint64_t offset;   // the frame's own module offset
  bool returns;      // offset is a return address: a call is behind it
};

struct ModuleWork {
  Json* entry = nullptr;  // the modules[] object, when the report lists the module
  std::string build_id;
  std::vector<PendingFrame> frames;
};

// A return address points after the call; the call itself (and its line) is
// one byte earlier. Exact pcs: the first native frame of a thread (where it
// was stopped), a frame the unwinder marked as a signal frame, and the frame
// a signal interrupted, i.e. the one after the kernel's sigreturn trampoline
// (libunwind marks the trampoline itself as the signal frame).
bool is_exact_pc(bool first_native, const Json& frame, const Json* prev_native,
                 bool prev_was_first) {
  if (first_native || bool_field(frame, "signal_frame")) return true;
  if (prev_native == nullptr) return false;
  if (!prev_was_first && bool_field(*prev_native, "signal_frame")) return true;
  return string_field(*prev_native, "symbol") == "__restore_rt";
}

// Frames a tail call left off the stack, from the call-site records (see
// tail_calls.h), on the frame the tail calls led to: `tail_calls`, innermost
// first, each marked "tail_call": true.
void add_tail_calls(const std::vector<ThreadFrame>& order, std::map<std::string, ModuleWork>& work,
                    Symbolizer& symbolizer) {
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    const ThreadFrame& callee = order[i];
    const ThreadFrame& caller = order[i + 1];
    // Only a return address has a call behind it.
    if (callee.path.empty() || caller.path.empty() || !caller.returns) continue;
    Module& callee_module = symbolizer.module(callee.path, work[callee.path].build_id);
    Module& caller_module = symbolizer.module(caller.path, work[caller.path].build_id);
    if (!has_dwarf(callee_module.debug_source()) || !has_dwarf(caller_module.debug_source()))
      continue;
    CallTarget call = caller_module.call_target(caller.offset);
    if (!call.known) continue;
    auto frames = callee_module.tail_calls(call, caller_module, callee.address);
    if (frames.empty()) continue;
    Json list = Json::array();
    for (const TailCallFrame& t : frames) {
      Json entry = Json::object();
      put_location(entry, t.info);
      char offset[32];
      snprintf(offset, sizeof offset, "0x%llx", static_cast<unsigned long long>(t.return_address));
      if (t.in_caller_module) entry["module"] = caller.path;
      entry["module_offset"] = offset;
      entry["tail_call"] = true;
      list.push_back(std::move(entry));
    }
    (*callee.frame)["tail_calls"] = std::move(list);
  }
}

}  // namespace

bool parse_address(const std::string& text, uint64_t* value) {
  if (text.empty() || text.size() > 18) return false;
  uint64_t v = 0;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    for (size_t i = 2; i < text.size(); ++i) {
      char c = text[i];
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<uint64_t>(d);
    }
  } else {
    for (char c : text) {
      if (c < '0' || c > '9') return false;
      uint64_t next = v * 10 + static_cast<uint64_t>(c - '0');
      if (next / 10 != v) return false;
      v = next;
    }
  }
  *value = v;
  return true;
}

Json parse_report(const std::string& text) {
  Json report;
  try {
    report = Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    throw BadReport("not JSON: " + what);
  } catch (const Json::exception& e) {
    // A number too large for a double and the like (found by fuzzing).
    std::string what = e.what();
    size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    throw BadReport("not a usable JSON document: " + what);
  }
  if (!report.is_object())
    throw BadReport("not a faultline report: the top level is not an object");
  std::string schema = string_field(report, "schema");
  if (schema != "faultline/1" && schema.rfind("faultline/1.", 0) != 0) {
    throw BadReport(schema.empty()
                        ? "not a faultline report: no \"schema\" field"
                        : "unsupported schema \"" + schema + "\" (expected faultline/1)");
  }
  return report;
}

ReportStats symbolize_report(Json& report, Symbolizer& symbolizer) {
  ReportStats stats;
  std::map<std::string, ModuleWork> work;  // by module path

  auto modules = report.find("modules");
  if (modules != report.end() && !modules->is_null()) {
    if (!modules->is_array()) throw BadReport("\"modules\" is not an array");
    for (auto& m : *modules) {
      if (!m.is_object()) continue;
      std::string path = string_field(m, "path");
      if (path.empty() || work.count(path)) continue;
      work[path].entry = &m;
      work[path].build_id = string_field(m, "build_id");
    }
  }

  std::vector<std::vector<ThreadFrame>> thread_frames;
  auto threads = report.find("threads");
  if (threads == report.end() || threads->is_null()) return stats;
  if (!threads->is_array()) throw BadReport("\"threads\" is not an array");
  // Every module frames point into, opened at once: the debug files
  // debuginfod has to send come concurrently, within one network budget.
  std::vector<std::pair<std::string, std::string>> wanted;
  for (const auto& thread : *threads) {
    auto frames = thread.is_object() ? thread.find("frames") : thread.end();
    if (!thread.is_object() || frames == thread.end() || !frames->is_array()) continue;
    for (const auto& frame : *frames) {
      std::string path = frame.is_object() ? string_field(frame, "module") : std::string();
      if (path.empty() ||
          std::any_of(wanted.begin(), wanted.end(), [&](const auto& m) { return m.first == path; }))
        continue;
      auto w = work.find(path);
      wanted.emplace_back(path, w == work.end() ? std::string() : w->second.build_id);
    }
  }
  symbolizer.open_all(wanted);
  for (auto& thread : *threads) {
    if (!thread.is_object()) continue;
    auto frames = thread.find("frames");
    if (frames == thread.end() || !frames->is_array()) continue;
    const Json* prev_native = nullptr;
    bool prev_was_first = false;
    bool prev_trampoline = false;
    std::vector<ThreadFrame>& order = thread_frames.emplace_back();
    for (auto& frame : *frames) {
      if (!frame.is_object() || string_field(frame, "kind") == "python") continue;
      bool first = prev_native == nullptr;
      bool exact = is_exact_pc(first, frame, prev_native, prev_was_first) || prev_trampoline;
      // Not a return address: where the thread stopped, a frame a signal
      // interrupted (marked, or the one above the sigreturn trampoline).
      bool returns = !first && !bool_field(frame, "signal_frame") && !prev_trampoline &&
                     string_field(*prev_native, "symbol") != "__restore_rt";
      prev_native = &frame;
      prev_was_first = first;
      prev_trampoline = false;
      ++stats.native_frames;

      std::string path = string_field(frame, "module");
      if (path.empty()) {
        order.push_back({&frame, "", 0, 0, false});
        continue;
      }
      ModuleWork& w = work[path];
      uint64_t offset = 0;
      if (!address_field(frame, "module_offset", &offset)) {
        // Older or partial reports: derive it from pc and the load bias.
        uint64_t pc = 0, bias = 0;
        if (!w.entry || !address_field(frame, "pc", &pc) ||
            !address_field(*w.entry, "load_bias", &bias) || pc < bias) {
          order.push_back({&frame, "", 0, 0, false});
          continue;
        }
        offset = pc - bias;
      }
      // A signal handler returns to the first byte of the sigreturn
      // trampoline: that pc is exact (one byte earlier is another
      // function), and so is the pc of the frame the signal interrupted.
      if (!exact && symbolizer.module(path, w.build_id).is_sigreturn_trampoline(offset)) {
        exact = true;
        prev_trampoline = true;
      }
      uint64_t own = offset;
      if (!exact && offset > 0) --offset;
      w.frames.push_back({&frame, offset});
      order.push_back({&frame, path, offset, own, returns});
    }
  }

  for (auto& [path, w] : work) {
    if (w.frames.empty()) continue;
    Module& module = symbolizer.module(path, w.build_id);
    DebugSource source = module.debug_source();
    if (w.entry) {
      // A run that finds less than an earlier one (say, without the
      // --debug-dir the first run had) keeps the earlier result.
      std::string previous = string_field(*w.entry, "debug_source");
      bool previous_had_lines = !previous.empty() && previous != to_string(DebugSource::kNone) &&
                                previous != to_string(DebugSource::kBuildIdMismatch);
      if (previous_had_lines && !has_dwarf(source)) {
        for (const auto& f : w.frames) {
          if (f.frame->contains("function")) ++stats.named;
          if (f.frame->contains("line")) ++stats.with_lines;
        }
        continue;
      }
      for (const char* key : kModuleFields) w.entry->erase(key);
      (*w.entry)["debug_source"] = to_string(source);
      if (has_dwarf(source)) (*w.entry)["debug_file"] = module.debug_file();
      if (!module.error().empty()) (*w.entry)["debug_error"] = module.error();
    }
    for (const auto& f : w.frames) {
      Json& frame = *f.frame;
      for (const char* key : kFrameFields) frame.erase(key);
      AddressInfo info = module.lookup(f.address);
      // The vDSO has no file to read: the name the crash path read from its
      // image is all there is.
      if (info.empty() && w.entry && bool_field(*w.entry, "vdso")) {
        std::string raw = string_field(frame, "symbol");
        if (!raw.empty()) info.frames.push_back({internal::demangle(raw.c_str()), "", 0, 0});
      }
      if (info.empty()) continue;
      const SourceLocation& real = info.frames.back();
      put_location(frame, info);
      if (!real.function.empty()) ++stats.named;
      if (real.line > 0) ++stats.with_lines;
    }
  }
  for (const auto& order : thread_frames) add_tail_calls(order, work, symbolizer);
  // After the lines: an AOTInductor kernel's call is found by its caller's line.
  annotate_inductor_kernels(report);
  return stats;
}

}  // namespace faultline::symbolize
