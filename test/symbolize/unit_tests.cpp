// Unit tests of the symbolizer's building blocks that have no oracle outside
// faultline: the nested-range map behind every lookup, address parsing and
// the report edits for hand-written reports.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "symbolize/dwarf_index.h"
#include "symbolize/elf_file.h"
#include "symbolize/report_symbolizer.h"

using faultline::symbolize::internal::IntervalMap;

TEST_CASE("a function with an inlined call inside: the deepest range wins") {
  IntervalMap map;
  // function [100, 200), inlined call [120, 140), inlined again inside [125, 130)
  map.build({{100, 200, 0, 1}, {120, 140, 1, 2}, {125, 130, 2, 3}});
  CHECK(map.find(99) == -1);
  CHECK(map.find(100) == 0);
  CHECK(map.find(119) == 0);
  CHECK(map.find(120) == 1);
  CHECK(map.find(125) == 2);
  CHECK(map.find(129) == 2);
  CHECK(map.find(130) == 1);
  CHECK(map.find(140) == 0);
  CHECK(map.find(199) == 0);
  CHECK(map.find(200) == -1);
}

TEST_CASE("a function split in hot and cold ranges, with a gap between") {
  IntervalMap map;
  map.build({{1000, 1100, 7, 1}, {5000, 5010, 7, 1}, {1050, 1060, 8, 2}, {5002, 5004, 9, 2}});
  CHECK(map.find(1055) == 8);
  CHECK(map.find(1099) == 7);
  CHECK(map.find(3000) == -1);
  CHECK(map.find(5003) == 9);
  CHECK(map.find(5009) == 7);
  CHECK(map.find(5010) == -1);
}

TEST_CASE("an empty map finds nothing") {
  IntervalMap map;
  map.build({});
  CHECK(map.find(0) == -1);
  CHECK(map.find(~0ull) == -1);
}

TEST_CASE("addresses: hex with 0x, decimal, nothing else") {
  uint64_t v = 0;
  CHECK(faultline::symbolize::parse_address("0x16a4c0", &v));
  CHECK(v == 0x16a4c0);
  CHECK(faultline::symbolize::parse_address("0XFFFFFFFFFFFFFFFF", &v));
  CHECK(v == ~0ull);
  CHECK(faultline::symbolize::parse_address("4096", &v));
  CHECK(v == 4096);
  CHECK_FALSE(faultline::symbolize::parse_address("", &v));
  CHECK_FALSE(faultline::symbolize::parse_address("0x", &v));
  CHECK_FALSE(faultline::symbolize::parse_address("0x1g", &v));
  CHECK_FALSE(faultline::symbolize::parse_address("0x10000000000000000", &v));
  CHECK_FALSE(faultline::symbolize::parse_address("99999999999999999999", &v));
  CHECK_FALSE(faultline::symbolize::parse_address("-1", &v));
}

TEST_CASE("build-ids round-trip between hex and bytes") {
  std::string bytes;
  CHECK(faultline::symbolize::internal::hex_to_bytes("93ac61ff", &bytes));
  CHECK(bytes.size() == 4);
  CHECK(faultline::symbolize::internal::bytes_to_hex(
            reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) == "93ac61ff");
  CHECK_FALSE(faultline::symbolize::internal::hex_to_bytes("abc", &bytes));
  CHECK_FALSE(faultline::symbolize::internal::hex_to_bytes("zz", &bytes));
}

TEST_CASE("demangling: C++ names demangled, others untouched") {
  using faultline::symbolize::internal::demangle;
  CHECK(demangle("_ZN4demo7computeEi") == "demo::compute(int)");
  CHECK(demangle("main") == "main");
  CHECK(demangle("_Znot_valid") == "_Znot_valid");
}

TEST_CASE("a function's base name: no scopes, template arguments, parameters or return type") {
  using faultline::symbolize::internal::function_base_name;
  CHECK(function_base_name("main") == "main");
  CHECK(function_base_name("ns::C<int>::f<double>(int) const") == "f");
  CHECK(function_base_name("double ns::C<int>::sum<double>(int) const") == "sum");
  CHECK(function_base_name("std::_Function_handler<void (Tensor&), main::{lambda(Tensor&)#1}>::"
                           "_M_invoke(std::_Any_data const&, Tensor&)") == "_M_invoke");
  CHECK(function_base_name("main::{lambda(Tensor&)#1}::operator()(Tensor&) const") == "operator()");
  CHECK(function_base_name("main(int, char**)::<lambda>::operator()") == "operator()");
  CHECK(function_base_name("(anonymous namespace)::hidden(int)") == "hidden");
  CHECK(function_base_name("std::ostream::operator<<(int)") == "operator<<");
  CHECK(function_base_name("ns::f<double>::<lambda>::operator()::<lambda>::operator()") ==
        "operator()");
}

TEST_CASE("clone suffixes come off, one or several") {
  using faultline::symbolize::internal::without_clone_suffix;
  CHECK(without_clone_suffix("f(int) [clone .cold]") == "f(int)");
  CHECK(without_clone_suffix("f(int) [clone .isra.0] [clone .cold]") == "f(int)");
  CHECK(without_clone_suffix("f(int)") == "f(int)");
}

TEST_CASE("reports that are not faultline/1 are refused with a reason") {
  using faultline::symbolize::BadReport;
  using faultline::symbolize::parse_report;
  CHECK_THROWS_WITH_AS(parse_report("{\"schema\": \"faultline/1\""), doctest::Contains("not JSON"),
                       BadReport);
  CHECK_THROWS_WITH_AS(parse_report("[1, 2]"), doctest::Contains("not an object"), BadReport);
  CHECK_THROWS_WITH_AS(parse_report("{\"schema\": \"other/3\"}"), doctest::Contains("other/3"),
                       BadReport);
  CHECK_NOTHROW(parse_report("{\"schema\": \"faultline/1\"}"));
  CHECK_NOTHROW(parse_report("{\"schema\": \"faultline/1.2\"}"));
}

TEST_CASE("a module that does not exist resolves nothing and says why") {
  faultline::symbolize::Symbolizer symbolizer({});
  auto& m = symbolizer.module("/nonexistent/libnothing.so", "");
  CHECK_FALSE(m.usable());
  CHECK(m.debug_source() == faultline::symbolize::DebugSource::kNone);
  CHECK(m.error().find("No such file") != std::string::npos);
  CHECK(m.lookup(0x1000).empty());
}

TEST_CASE("python frames and frames without a module are left alone") {
  faultline::symbolize::Symbolizer symbolizer({});
  auto report = faultline::symbolize::parse_report(R"({"schema": "faultline/1", "threads": [
      {"frames": [{"kind": "python", "file": "a.py", "line": 3, "function": "f"},
                  {"kind": "native", "pc": "0x10"}, 17, null]}]})");
  auto before = report.dump();
  auto stats = faultline::symbolize::symbolize_report(report, symbolizer);
  CHECK(stats.native_frames == 1);
  CHECK(stats.named == 0);
  CHECK(report.dump() == before);
}
