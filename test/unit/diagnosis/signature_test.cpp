// The crash signature against its specification: the test vectors of
// doc/report-format.md ("Crash signature"), read from the document itself,
// through the SignatureBuilder the crash path and `faultline triage` use.
#include "core/diagnosis/signature.h"

#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

using namespace faultline::core;
using nlohmann::json;

namespace {

json spec_vectors() {
  std::ifstream in(FAULTLINE_SOURCE_DIR "/doc/report-format.md");
  std::stringstream text;
  text << in.rdbuf();
  std::string doc = text.str();
  size_t mark = doc.find("<!-- signature-vectors -->");
  REQUIRE(mark != std::string::npos);
  size_t begin = doc.find("```json\n", mark);
  REQUIRE(begin != std::string::npos);
  begin += 8;
  size_t end = doc.find("```", begin);
  REQUIRE(end != std::string::npos);
  return json::parse(doc.substr(begin, end - begin));
}

std::string text(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

const char* or_null(const std::string& s) {
  return s.empty() ? nullptr : s.c_str();
}

// A vector's report as the crash path would hand it over.
std::string signature_of(const json& r) {
  char out[kSignatureBytes];
  if (text(r, "kind") == "dump") {
    dump_signature(out);
    return out;
  }
  const json& sig = r["signal"];
  std::string signal = text(sig, "name");
  if (signal.empty() || signal == "UNKNOWN") signal = "?";
  bool sent_by_process = sig.contains("code") && sig["code"].get<int>() <= 0;
  bool terminate = text(r, "kind") == "terminate";
  std::string exception_type = terminate ? text(r["exception"], "type") : "";
  std::string category = text(r["diagnosis"], "category");
  SignatureBuilder s(signal.c_str(), category.c_str(), terminate ? exception_type.c_str() : nullptr,
                     sent_by_process);
  const json& frames = r["frames"];
  // Copies that stay put until finish(): python() keeps pointers.
  std::vector<std::array<std::string, 5>> f(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    f[i] = {text(frames[i], "origin"), text(frames[i], "module"), text(frames[i], "symbol"),
            text(frames[i], "file"), text(frames[i], "function")};
    if (text(frames[i], "kind") == "python") {
      s.python(or_null(f[i][3]), f[i][4].c_str(), f[i][0].c_str());
    } else {
      uint64_t offset = std::strtoull(text(frames[i], "module_offset").c_str(), nullptr, 16);
      s.native(or_null(f[i][1]), or_null(f[i][2]), offset, f[i][0].c_str());
    }
  }
  s.finish(out);
  return out;
}

}  // namespace

TEST_CASE("signature: the specification's test vectors") {
  json vectors = spec_vectors();
  REQUIRE(vectors.size() >= 10);
  for (const json& v : vectors) {
    CAPTURE(v["name"].get<std::string>());
    CHECK(signature_of(v["report"]) == v["signature"].get<std::string>());
  }
}

TEST_CASE("signature: the hash, its separator and its byte order") {
  char out[kSignatureBytes];
  SignatureHash none;
  none.finish(out);
  // The start value 0x14650fb0739d0383, least significant byte first.
  CHECK(std::string(out) == "83039d73b00f6514");
  SignatureHash ab, a_b;
  ab.field("ab");
  ab.field("");
  a_b.field("a");
  a_b.field("b");
  char x[kSignatureBytes], y[kSignatureBytes];
  ab.finish(x);
  a_b.finish(y);
  CHECK(std::string(x) != std::string(y));
  SignatureHash null_field, empty_field;
  null_field.field(nullptr);
  empty_field.field("");
  null_field.finish(x);
  empty_field.finish(y);
  CHECK(std::string(x) == std::string(y));
}

TEST_CASE("signature: a native field is cut, never overflows") {
  std::string sym(1000, 'x');
  SignatureBuilder a("SIGSEGV", "crash", nullptr, false), b("SIGSEGV", "crash", nullptr, false);
  a.native("/m/mod.so", sym.c_str(), 0, "native");
  sym[600] = 'y';  // past the 255 bytes kept
  b.native("/m/mod.so", sym.c_str(), 0, "native");
  char x[kSignatureBytes], y[kSignatureBytes];
  a.finish(x);
  b.finish(y);
  CHECK(std::string(x) == std::string(y));
}

TEST_CASE("signature: generated frames, as a report records them") {
  CHECK(signature_frame_generated("inductor", false, "/anything.so", nullptr));
  CHECK(signature_frame_generated("triton", false, "/c/cuda_utils.so", "launch"));
  CHECK_FALSE(signature_frame_generated("triton", false, "/x/_C/libtriton.so", "_ZN4mlir3fooEv"));
  CHECK(signature_frame_generated("triton", false, "/x/_C/libtriton.so", "triton_poi_0"));
  CHECK(signature_frame_generated("fx", true, "<eval_with_key>.4", "forward"));
  CHECK_FALSE(signature_frame_generated("fx", true, "/p/torch/fx/graph_module.py", "__call__"));
  CHECK(signature_frame_generated("dynamo", true, "/h/m.py", "torch_dynamo_resume_in_f_at_3"));
  CHECK_FALSE(signature_frame_generated("dynamo", true, "/p/torch/_dynamo/eval_frame.py", "_fn"));
  CHECK(signature_frame_generated("inductor", true, "/tmp/cache/ab/cab.py", "call"));
  CHECK_FALSE(signature_frame_generated("inductor", true, "/p/torch/_inductor/graph.py", "run"));
  CHECK_FALSE(signature_frame_generated("native", false, "/x.so", "f"));
  CHECK_FALSE(signature_frame_generated(nullptr, true, nullptr, nullptr));
}
