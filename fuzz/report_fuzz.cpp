// libFuzzer target: the report reader and everything that renders a report.
// Any input must either be rejected with a ReportError or render; a crash,
// a sanitizer finding or any other exception is a bug.
//
//   CXX=clang++-14 cmake -S . -B build-fuzz -DFAULTLINE_FUZZ=ON -DFAULTLINE_TESTS=OFF
//   cmake --build build-fuzz --target report_fuzz
//   build-fuzz/fuzz/report_fuzz fuzz/report_corpus test/data -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string>

#include "report/render.h"
#include "report/report.h"
#include "report/schema.h"
#include "report/sentry.h"
#include "report/triage.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  using namespace faultline::report;
  try {
    Report r = parse_report(text, "fuzz.json");
    render_text(r, TextOptions{true, ""});
    render_faulthandler(r);
    render_markdown(r, MarkdownOptions{2000});
    render_explain(r);
    sentry_envelope(r);
    compute_signature(r);
    validate_report(r.raw);
  } catch (const ReportError&) {
    // Rejected with a message: what bad input should get.
  }
  return 0;
}
