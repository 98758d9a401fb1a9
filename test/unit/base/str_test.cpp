#include "core/base/str.h"

#include <doctest/doctest.h>

#include <ctime>
#include <string>

#include "core/base/time_fmt.h"

using namespace faultline::core;

TEST_CASE("number formatting") {
  char b[32];
  CHECK(std::string(b, fmt_dec(b, 0)) == "0");
  CHECK(std::string(b, fmt_dec(b, 18446744073709551615ull)) == "18446744073709551615");
  CHECK(std::string(b, fmt_sdec(b, INT64_MIN)) == "-9223372036854775808");
  CHECK(std::string(b, fmt_hex(b, 0)) == "0x0");
  CHECK(std::string(b, fmt_hex(b, 0x7fABCDEF01ull)) == "0x7fabcdef01");
  // Every digit count, with the top digit 1 and f.
  for (int digits = 1; digits <= 16; ++digits) {
    const uint64_t one = 1ull << (4 * (digits - 1));
    const uint64_t all = digits == 16 ? ~0ull : (one << 4) - 1;
    CHECK(std::string(b, fmt_hex(b, one)) == "0x1" + std::string(digits - 1, '0'));
    CHECK(std::string(b, fmt_hex(b, all)) == "0x" + std::string(digits, 'f'));
  }
  int64_t v;
  CHECK(parse_int("-42", &v));
  CHECK(v == -42);
  CHECK_FALSE(parse_int("4x", &v));
  CHECK_FALSE(parse_int("99999999999999999999", &v));
}

TEST_CASE("StrBuf truncates and stays terminated") {
  char b[8];
  StrBuf s(b, sizeof b);
  s.add("hello").add(" world");
  CHECK(std::string(s.c_str()) == "hello w");
  CHECK(s.truncated());
}

TEST_CASE("UTC formatting agrees with gmtime_r") {
  for (int64_t t : {0LL, 951782400LL, 1709164800LL, 4102444799LL, 1798416000LL, 1234567890LL}) {
    char mine[32];
    format_iso8601(mine, t, 123000000);
    time_t tt = static_cast<time_t>(t);
    struct tm tm;
    gmtime_r(&tt, &tm);
    char theirs[64];
    strftime(theirs, sizeof theirs, "%Y-%m-%dT%H:%M:%S.123Z", &tm);
    CHECK(std::string(mine) == theirs);
  }
}

TEST_CASE("path_basename and str_find") {
  CHECK(std::string(path_basename("/usr/lib/libc.so.6")) == "libc.so.6");
  CHECK(std::string(path_basename("plain")) == "plain");
  const char* s = "torch/_dynamo/eval_frame.py";
  CHECK(str_find(s, 27, "_dynamo") == s + 6);
  CHECK(str_find(s, 10, "_dynamo") == nullptr);
}
