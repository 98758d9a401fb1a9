#include "report/schema.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <mutex>
#include <regex>
#include <set>

namespace faultline::report {

using nlohmann::json;

namespace {

// Keywords that only annotate: they never make a value invalid.
const std::set<std::string> kAnnotations = {"$schema",     "$id",      "$comment", "title",
                                            "description", "examples", "default",  "deprecated",
                                            "readOnly",    "writeOnly"};
// Keywords this validator checks. Anything else in a schema is an error.
const std::set<std::string> kAssertions = {
    "type",      "enum",     "const",    "properties", "required", "additionalProperties",
    "items",     "minItems", "maxItems", "minimum",    "maximum",  "minLength",
    "maxLength", "pattern",  "allOf",    "anyOf",      "oneOf",    "not",
    "if",        "then",     "else",     "$ref",       "$defs"};

// Regexes compiled once per pattern string. JSON Schema patterns are
// ECMA-262 and unanchored (a match anywhere), which is std::regex_search with
// the default ECMAScript grammar.
const std::regex& compiled(const std::string& pattern) {
  static std::mutex mu;
  static std::map<std::string, std::regex> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(pattern);
  if (it == cache.end()) it = cache.emplace(pattern, std::regex(pattern)).first;
  return it->second;
}

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

bool has_type(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    // JSON Schema: a number with a zero fractional part is an integer (1.0 too).
    if (v.is_number_integer()) return true;
    if (v.is_number_float()) {
      double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d;
    }
  }
  return false;
}

std::string type_of(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  return v.type_name();
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

double number(const json& v) {
  return v.get<double>();
}

// A short rendering of a value for messages.
std::string brief(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

}  // namespace

SchemaValidator::SchemaValidator(json schema) : root_(std::move(schema)) {
  check_schema(root_, "#");
}

void SchemaValidator::check_schema(const json& s, const std::string& where) const {
  if (s.is_boolean()) return;
  if (!s.is_object()) throw std::invalid_argument(where + ": a schema must be an object");
  for (const auto& [key, value] : s.items()) {
    if (kAnnotations.count(key)) continue;
    if (!kAssertions.count(key)) {
      throw std::invalid_argument(
          fmt::format("{}: keyword \"{}\" is not supported by faultline's validator", where, key));
    }
    const std::string at = where + "/" + escape_pointer(key);
    if (key == "properties" || key == "$defs") {
      for (const auto& [name, sub] : value.items())
        check_schema(sub, at + "/" + escape_pointer(name));
    } else if (key == "allOf" || key == "anyOf" || key == "oneOf") {
      if (!value.is_array() || value.empty()) throw std::invalid_argument(at + ": needs an array");
      for (size_t i = 0; i < value.size(); ++i)
        check_schema(value[i], at + "/" + std::to_string(i));
    } else if (key == "items" || key == "additionalProperties" || key == "not" || key == "if" ||
               key == "then" || key == "else") {
      check_schema(value, at);
    } else if (key == "$ref") {
      resolve(value.get<std::string>());
    } else if (key == "pattern") {
      try {
        compiled(value.get<std::string>());
      } catch (const std::regex_error& e) {
        throw std::invalid_argument(fmt::format("{}: bad pattern: {}", at, e.what()));
      }
    }
  }
}

const json& SchemaValidator::resolve(const std::string& ref) const {
  if (ref.rfind("#", 0) != 0) {
    throw std::invalid_argument("$ref \"" + ref + "\": only local references (#/...) supported");
  }
  try {
    return root_.at(json::json_pointer(ref.substr(1)));
  } catch (const json::exception&) {
    throw std::invalid_argument("$ref \"" + ref + "\" does not resolve");
  }
}

std::vector<SchemaError> SchemaValidator::validate(const json& instance) const {
  std::vector<SchemaError> out;
  validate(root_, instance, "", out);
  return out;
}

void SchemaValidator::validate(const json& s, const json& v, const std::string& path,
                               std::vector<SchemaError>& out) const {
  if (s.is_boolean()) {
    if (!s.get<bool>()) out.push_back({path, "no value is allowed here"});
    return;
  }
  auto fail = [&](std::string message) { out.push_back({path, std::move(message)}); };
  auto valid = [&](const json& sub) {
    std::vector<SchemaError> scratch;
    validate(sub, v, path, scratch);
    return scratch.empty();
  };

  if (auto it = s.find("$ref"); it != s.end())
    validate(resolve(it->get<std::string>()), v, path, out);

  if (auto it = s.find("type"); it != s.end()) {
    bool ok = false;
    if (it->is_string()) {
      ok = has_type(v, it->get<std::string>());
    } else {
      for (const json& t : *it) ok = ok || has_type(v, t.get<std::string>());
    }
    if (!ok) {
      fail(fmt::format("expected {}, got {}", it->is_string() ? it->get<std::string>() : it->dump(),
                       type_of(v)));
      return;  // the other keywords would only repeat the same complaint
    }
  }
  if (auto it = s.find("const"); it != s.end() && v != *it) {
    fail(fmt::format("must be {}, got {}", it->dump(), brief(v)));
  }
  if (auto it = s.find("enum"); it != s.end()) {
    bool found = false;
    for (const json& e : *it) found = found || e == v;
    if (!found) fail(fmt::format("must be one of {}, got {}", it->dump(), brief(v)));
  }

  if (v.is_object()) {
    if (auto it = s.find("required"); it != s.end()) {
      for (const json& name : *it) {
        if (!v.contains(name.get<std::string>())) {
          fail(fmt::format("missing required field \"{}\"", name.get<std::string>()));
        }
      }
    }
    auto props = s.find("properties");
    if (props != s.end()) {
      for (const auto& [name, sub] : props->items()) {
        auto member = v.find(name);
        if (member != v.end()) validate(sub, *member, path + "/" + escape_pointer(name), out);
      }
    }
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      for (const auto& [name, member] : v.items()) {
        if (props != s.end() && props->contains(name)) continue;
        validate(*it, member, path + "/" + escape_pointer(name), out);
      }
    }
  }

  if (v.is_array()) {
    if (auto it = s.find("items"); it != s.end()) {
      for (size_t i = 0; i < v.size(); ++i)
        validate(*it, v[i], path + "/" + std::to_string(i), out);
    }
    if (auto it = s.find("minItems"); it != s.end() && v.size() < it->get<size_t>()) {
      fail(fmt::format("needs at least {} items, has {}", it->get<size_t>(), v.size()));
    }
    if (auto it = s.find("maxItems"); it != s.end() && v.size() > it->get<size_t>()) {
      fail(fmt::format("allows at most {} items, has {}", it->get<size_t>(), v.size()));
    }
  }

  if (v.is_number()) {
    if (auto it = s.find("minimum"); it != s.end() && number(v) < number(*it)) {
      fail(fmt::format("must be >= {}, got {}", it->dump(), v.dump()));
    }
    if (auto it = s.find("maximum"); it != s.end() && number(v) > number(*it)) {
      fail(fmt::format("must be <= {}, got {}", it->dump(), v.dump()));
    }
  }

  if (v.is_string()) {
    const std::string& str = v.get_ref<const std::string&>();
    if (auto it = s.find("minLength"); it != s.end() && code_points(str) < it->get<size_t>()) {
      fail(fmt::format("must be at least {} characters long", it->get<size_t>()));
    }
    if (auto it = s.find("maxLength"); it != s.end() && code_points(str) > it->get<size_t>()) {
      fail(fmt::format("must be at most {} characters long", it->get<size_t>()));
    }
    if (auto it = s.find("pattern"); it != s.end()) {
      if (!std::regex_search(str, compiled(it->get<std::string>()))) {
        fail(fmt::format("{} does not match /{}/", brief(v), it->get<std::string>()));
      }
    }
  }

  if (auto it = s.find("allOf"); it != s.end()) {
    for (const json& sub : *it) validate(sub, v, path, out);
  }
  if (auto it = s.find("anyOf"); it != s.end()) {
    bool any = false;
    for (const json& sub : *it) any = any || valid(sub);
    if (!any) fail(fmt::format("{} matches none of the allowed forms", brief(v)));
  }
  if (auto it = s.find("oneOf"); it != s.end()) {
    size_t matches = 0;
    for (const json& sub : *it) matches += valid(sub) ? 1 : 0;
    if (matches != 1) {
      fail(fmt::format("{} must match exactly one allowed form, matches {}", brief(v), matches));
    }
  }
  if (auto it = s.find("not"); it != s.end() && valid(*it)) {
    fail(fmt::format("{} matches a form that is not allowed", brief(v)));
  }
  if (auto it = s.find("if"); it != s.end()) {
    if (valid(*it)) {
      if (auto then = s.find("then"); then != s.end()) validate(*then, v, path, out);
    } else if (auto other = s.find("else"); other != s.end()) {
      validate(*other, v, path, out);
    }
  }
}

// Generated at build time from schema/faultline-1.schema.json (see CMakeLists.txt).
extern const char* const kBuiltinSchemaText;

const json& builtin_schema() {
  static const json schema = json::parse(kBuiltinSchemaText);
  return schema;
}

std::vector<SchemaError> validate_report(const json& doc) {
  static const SchemaValidator validator(builtin_schema());
  return validator.validate(doc);
}

}  // namespace faultline::report
