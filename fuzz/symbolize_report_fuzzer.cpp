// libFuzzer target: the report side of `faultline symbolize`. Any input must
// either be refused with BadReport or be symbolized and serialised again; a
// crash, a sanitizer finding or any other exception is a bug. Module paths in
// the input are real paths on this machine, so a corpus naming libc or the
// seed program reaches the DWARF path too.
//
//   CXX=clang++-14 cmake -S . -B build-fuzz -DFAULTLINE_FUZZ=ON
//   cmake --build build-fuzz --target symbolize_report_fuzzer
//   build-fuzz/fuzz-symbolize/symbolize_report_fuzzer build-fuzz/fuzz-symbolize/corpus-report \
//       fuzz/symbolize_corpus/report -max_total_time=600
#include <cstddef>
#include <cstdint>
#include <string>

#include "symbolize/report_symbolizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One symbolizer for the whole run: modules stay cached like in one CLI
  // run over many frames, and libc is not reopened per input.
  static faultline::symbolize::Symbolizer symbolizer([] {
    faultline::symbolize::SearchOptions o;
    o.use_debuginfod = false;
    return o;
  }());
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto report = faultline::symbolize::parse_report(text);
    faultline::symbolize::symbolize_report(report, symbolizer);
    auto again = report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    auto reread = faultline::symbolize::parse_report(again);
    faultline::symbolize::symbolize_report(reread, symbolizer);
    // Idempotent: a second run over the output changes nothing.
    if (reread.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) != again)
      __builtin_trap();
  } catch (const faultline::symbolize::BadReport&) {
  }
  return 0;
}
