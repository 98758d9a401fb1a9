// Known PyTorch crash patterns, matched against a report (offline).
//
//   for (const Hint& h : faultline::report::match_hints(report_json)) {
//     std::cout << h.title << "\n";
//     for (const auto& e : h.evidence) std::cout << "  matched: " << e << "\n";
//     for (const auto& a : h.advice) std::cout << "  - " << a << "\n";
//   }
//
// The patterns are a data table (torch_hints.cpp): each says which evidence
// it needs (repeated compilations of one function in the breadcrumbs the
// faultline Python package writes, frames of given origins on the crashed
// thread) and the advice that goes with it. A hint lists what in the report
// matched, so a reader can judge whether it applies.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace faultline::report {

struct Hint {
  std::string id;                     // "torch.repeated-compile"
  std::string title;                  // one line
  std::vector<std::string> evidence;  // what in the report matched
  std::vector<std::string> advice;    // what to try, most useful first

  // The hint as one JSON object {"id","title","evidence","advice","text"};
  // "text" is the title, so readers of diagnosis.hints that show only
  // {"text": ...} still show something useful.
  nlohmann::json to_json() const;
};

// Every hint whose pattern the report matches, strongest first. Never
// throws on a malformed report: missing or odd fields just match nothing.
std::vector<Hint> match_hints(const nlohmann::json& report);

// One compile event parsed from a breadcrumb the faultline Python package
// wrote ("torch.compile: compiling NAME (FILE:LINE) compile_id=ID compiles=N
// reason: ..."). Exposed for tests.
struct CompileEvent {
  std::string function;
  std::string location;  // "FILE:LINE"
  std::string compile_id;
  int compiles = 0;
  std::string reason;
};
bool parse_compile_breadcrumb(const std::string& message, CompileEvent* out);

}  // namespace faultline::report
