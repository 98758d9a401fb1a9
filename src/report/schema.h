// JSON Schema validation of reports (offline).
//
//   auto errors = faultline::report::validate_report(doc);   // the built-in faultline/1 schema
//   for (const auto& e : errors) fmt::print("{}: {}\n", e.path, e.message);
//
// SchemaValidator implements the subset of JSON Schema (draft 2020-12) that
// schema/faultline-1.schema.json uses: type, enum, const, properties,
// required, additionalProperties, items, minItems, maxItems, minimum, maximum,
// minLength, maxLength, pattern, allOf, anyOf, oneOf, not, if/then/else and
// local $ref ("#/$defs/..."). A schema using any other keyword is rejected when
// the validator is built, so the C++ checks can never silently be weaker than
// what Python's jsonschema (the tests' oracle) applies to the same file.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace faultline::report {

struct SchemaError {
  std::string path;     // JSON pointer of the offending value ("" is the root)
  std::string message;  // what is wrong, in words
};

class SchemaValidator {
 public:
  // Throws std::invalid_argument when the schema uses an unsupported keyword
  // or a $ref that does not resolve.
  explicit SchemaValidator(nlohmann::json schema);

  // All violations found (empty: valid). Each value reports its own errors;
  // for anyOf/oneOf only a summary is reported.
  std::vector<SchemaError> validate(const nlohmann::json& instance) const;

 private:
  void check_schema(const nlohmann::json& s, const std::string& where) const;
  const nlohmann::json& resolve(const std::string& ref) const;
  void validate(const nlohmann::json& s, const nlohmann::json& v, const std::string& path,
                std::vector<SchemaError>& out) const;
  nlohmann::json root_;
};

// The faultline/1 schema shipped with this build (schema/faultline-1.schema.json,
// embedded at build time).
const nlohmann::json& builtin_schema();
std::vector<SchemaError> validate_report(const nlohmann::json& doc);

}  // namespace faultline::report
