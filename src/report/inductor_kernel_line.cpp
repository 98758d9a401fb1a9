#include "report/inductor_kernel_line.h"

#include <utility>
#include <vector>

namespace faultline::report {
namespace {

using json = nlohmann::json;

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "aten.relu.default" -> "relu"; anything else as written.
std::string short_op(const std::string& op) {
  size_t dot = op.find('.');
  if (dot == std::string::npos) return op;
  size_t end = op.find('.', dot + 1);
  return op.substr(dot + 1, end == std::string::npos ? std::string::npos : end - dot - 1);
}

std::string file_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string inductor_kernel_text(const json& frame) {
  if (!frame.is_object()) return "";
  auto k = frame.find("inductor_kernel");
  if (k == frame.end() || !k->is_object()) return "";
  std::string name = str(*k, "name");
  if (name.empty()) return "";
  std::string out = "in " + name;
  auto origins = k->find("origins");
  if (origins != k->end() && origins->is_array() && !origins->empty()) {
    // Ops grouped by the user line they came from, in Inductor's order.
    std::vector<std::pair<std::string, std::string>> groups;  // where, ops
    for (const json& o : *origins) {
      if (!o.is_object()) continue;
      std::string op = short_op(str(o, "op"));
      std::string where = str(o, "file").empty()
                              ? std::string()
                              : file_name(str(o, "file")) + ":" +
                                    (o.contains("line") && o["line"].is_number_integer()
                                         ? std::to_string(o["line"].get<int64_t>())
                                         : std::string("?"));
      auto g = groups.begin();
      for (; g != groups.end() && g->first != where; ++g) {
      }
      if (g == groups.end()) {
        groups.emplace_back(where, op);
      } else if (!op.empty()) {
        g->second += (g->second.empty() ? "" : ", ") + op;
      }
    }
    std::string from;
    for (const auto& [where, ops] : groups) {
      if (!from.empty()) from += "; ";
      from += (ops.empty() ? "?" : ops) + (where.empty() ? "" : " at " + where);
    }
    return out + " (from " + from + ")";
  }
  if (!str(*k, "source_error").empty()) {
    return out + " (its origins are unknown: " + str(*k, "source_error") + ")";
  }
  return out +
         " (no source lines: compiled without torch._inductor.config.comment_origin; the ops are "
         "in the kernel's name)";
}

std::string crashed_inductor_kernel(const Report& r) {
  const Thread* t = r.crashed_thread();
  if (!t) return "";
  for (const Frame& f : t->frames) {
    if (!f.raw) continue;
    std::string text = inductor_kernel_text(*f.raw);
    if (!text.empty()) return text;
  }
  return "";
}

}  // namespace faultline::report
