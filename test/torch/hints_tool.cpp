// torch_hints_tool REPORT.json: prints match_hints() of a report as a JSON
// array, for the pytest side (test_torch_reports.py).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "report/torch_hints.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: torch_hints_tool REPORT.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded()) {
    std::cerr << "torch_hints_tool: " << argv[1] << " is not JSON\n";
    return 1;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& h : faultline::report::match_hints(report)) out.push_back(h.to_json());
  std::cout << out.dump(2) << "\n";
  return 0;
}
