// The crash path's JSON writer: every byte sequence must come out as JSON
// that a strict parser (nlohmann::json) accepts, and text must round-trip.
#include "core/write/json_writer.h"

#include <doctest/doctest.h>
#include <string.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "json_render.h"

using faultline::core::FdSink;
using faultline::core::JsonWriter;

TEST_CASE("nested objects and arrays get commas right") {
  std::string out = render_json([](JsonWriter& w) {
    w.begin_object();
    w.field_str("a", "x");
    w.key("b");
    w.begin_array();
    w.num(-5);
    w.unum(18446744073709551615ull);
    w.boolean(true);
    w.null();
    w.begin_object();
    w.end_object();
    w.end_array();
    w.field_hex("c", 0xdeadbeef);
    w.end_object();
  });
  auto j = nlohmann::json::parse(out);
  CHECK(j["a"] == "x");
  CHECK(j["b"].size() == 5);
  CHECK(j["b"][0] == -5);
  CHECK(j["b"][1].get<uint64_t>() == 18446744073709551615ull);
  CHECK(j["c"] == "0xdeadbeef");
}

TEST_CASE("control characters, quotes and backslashes are escaped") {
  std::string s = "q\"b\\n\nt\tz\x01\x1f\x7f";
  std::string out = render_json([&](JsonWriter& w) { w.str_n(s.data(), s.size()); });
  CHECK(nlohmann::json::parse(out).get<std::string>() == s);
}

TEST_CASE("valid UTF-8 passes through unchanged") {
  std::string s = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xa5 \xe6\x97\xa5\xe6\x9c\xac";
  std::string out = render_json([&](JsonWriter& w) { w.str_n(s.data(), s.size()); });
  CHECK(nlohmann::json::parse(out).get<std::string>() == s);
}

TEST_CASE("invalid UTF-8 becomes U+FFFD and str_exact keeps the bytes in hex") {
  std::string s =
      "a\xff"
      "b\xc3"
      "c\xed\xa0\x80"
      "d\xc0\xaf";  // stray, cut, surrogate, overlong
  std::string out = render_json([&](JsonWriter& w) {
    w.begin_object();
    w.str_exact("path", s.data(), s.size());
    w.end_object();
  });
  auto j = nlohmann::json::parse(out);
  std::string v = j["path"];
  CHECK(v.find("\xef\xbf\xbd") != std::string::npos);
  CHECK(v.front() == 'a');
  REQUIRE(j.contains("path_hex"));
  std::string hex = j["path_hex"];
  std::string back;
  for (size_t i = 0; i < hex.size(); i += 2) {
    back.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  CHECK(back == s);
}

TEST_CASE("valid strings get no _hex twin") {
  std::string out = render_json([](JsonWriter& w) {
    w.begin_object();
    w.str_exact("path", "/usr/lib/x.so", 13);
    w.end_object();
  });
  CHECK(nlohmann::json::parse(out).size() == 1);
}

TEST_CASE("any random byte sequence yields parseable JSON (10,000 cases)") {
  std::mt19937 rng(1234);
  for (int i = 0; i < 10000; ++i) {
    std::string s(rng() % 40, '\0');
    for (auto& ch : s) ch = static_cast<char>(rng() & 0xff);
    std::string out = render_json(
        [&](JsonWriter& w) {
          w.begin_object();
          w.str_exact("k", s.data(), s.size());
          w.end_object();
        },
        7);  // a tiny buffer exercises flushing at every position
    auto j = nlohmann::json::parse(out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    if (j.size() == 1) CHECK(j["k"].get<std::string>() == s);
  }
}

TEST_CASE("a failing sink reports the failure") {
  char buf[8];
  FdSink sink(987, buf, sizeof buf);  // not an open fd: write fails with EBADF
  JsonWriter w(&sink);
  w.str("0123456789abcdef");
  CHECK_FALSE(sink.flush());
  CHECK(sink.failed());
}

TEST_CASE("is_plain: only strings that need no escaping") {
  CHECK(JsonWriter::is_plain("/usr/lib/x86_64-linux-gnu/libc.so.6", 35));
  CHECK(JsonWriter::is_plain("", 0));
  for (const char* s : {"a\"b", "a\\b", "a\nb", "a\x7f", "caf\xc3\xa9", "\x01"}) {
    INFO(s);
    CHECK_FALSE(JsonWriter::is_plain(s, strlen(s)));
  }
  std::string out = render_json([](JsonWriter& w) {
    w.begin_object();
    w.field_plain("module", "/lib/libc.so.6", 14);
    w.field_str("next", "x");
    w.end_object();
  });
  auto j = nlohmann::json::parse(out);
  CHECK(j["module"] == "/lib/libc.so.6");
  CHECK(j["next"] == "x");
}

TEST_CASE("reserve_value: a value written in place gets its comma, and no room writes nothing") {
  std::string out = render_json(
      [](JsonWriter& w) {
        w.begin_array();
        for (int i = 0; i < 3; ++i) {
          char* d = w.reserve_value(4);
          REQUIRE(d);
          memcpy(d, "true", 4);
          w.commit_value(4);
        }
        // Room only once the buffer is flushed: flushed, then written.
        char* e = w.reserve_value(12);
        REQUIRE(e);
        memcpy(e, "\"0123456789\"", 12);
        w.commit_value(12);
        // More than the buffer holds: nullptr, nothing written (no comma).
        CHECK(w.reserve_value(64) == nullptr);
        w.null();
        w.end_array();
      },
      16);
  CHECK(out == "[true,true,true,\"0123456789\",null]");
}
