// faultline validate REPORT...: checks reports against the faultline/1 JSON Schema.
#include "cli/cmd_validate.h"

#include <fmt/format.h>

#include <memory>

#include "cli/report_input.h"
#include "report/render.h"
#include "report/schema.h"

namespace faultline::cli {

namespace {

struct ValidateArgs {
  std::vector<std::string> paths;
  std::string schema_path;
  bool quiet = false;
  bool print_schema = false;
};

}  // namespace

void add_validate_command(CLI::App& app, int& status) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* v = app.add_subcommand(
      "validate",
      "Check reports against the faultline/1 JSON Schema (exit 0: all valid, 1: any invalid)");
  v->add_option("REPORT", args->paths, "report files (JSON)");
  v->add_option("--schema", args->schema_path,
                "validate against this schema file instead of the built-in faultline/1 schema");
  v->add_flag("-q,--quiet", args->quiet, "print only what is wrong");
  v->add_flag("--print-schema", args->print_schema, "print the built-in schema and exit");
  v->callback([args, &status] {
    if (args->print_schema) {
      status = print_out(report::builtin_schema().dump(2) + "\n") ? kExitOk : kExitFailed;
      return;
    }
    if (args->paths.empty()) {
      fmt::print(stderr, "faultline validate: no REPORT given (see --help)\n");
      status = kExitUsage;
      return;
    }
    std::unique_ptr<report::SchemaValidator> custom;
    if (!args->schema_path.empty()) {
      try {
        custom = std::make_unique<report::SchemaValidator>(
            report::parse_json(report::read_file(args->schema_path), args->schema_path));
      } catch (const std::exception& e) {
        fmt::print(stderr, "faultline: schema {}: {}\n", args->schema_path, e.what());
        status = kExitFailed;
        return;
      }
    }
    size_t bad = 0;
    // Paths, values and keys quoted in messages come from the files: escaped.
    auto* esc = &report::escape_controls;
    for (const std::string& path : args->paths) {
      std::vector<report::SchemaError> errors;
      try {
        nlohmann::json doc = report::parse_json(report::read_file(path), path);
        errors = custom ? custom->validate(doc) : report::validate_report(doc);
      } catch (const report::ReportError& e) {
        fmt::print("{}: invalid: {}\n", esc(path), esc(e.what()));
        ++bad;
        continue;
      }
      if (errors.empty()) {
        if (!args->quiet) fmt::print("{}: ok\n", esc(path));
        continue;
      }
      ++bad;
      fmt::print("{}: invalid ({} problems)\n", esc(path), errors.size());
      for (const report::SchemaError& e : errors) {
        fmt::print("  {}: {}\n", e.path.empty() ? "(document)" : esc(e.path), esc(e.message));
      }
    }
    if (!args->quiet && args->paths.size() > 1) {
      fmt::print("{} of {} reports valid\n", args->paths.size() - bad, args->paths.size());
    }
    std::fflush(stdout);
    status = bad ? kExitFailed : kExitOk;
  });
}

}  // namespace faultline::cli
