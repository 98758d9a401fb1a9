#include "core/base/time_fmt.h"

namespace faultline::core {
namespace {

struct Civil {
  int64_t year;
  int month, day, hour, minute, second;
};

Civil to_civil(int64_t sec) {
  int64_t days = sec / 86400;
  int64_t rem = sec % 86400;
  if (rem < 0) rem += 86400, --days;
  // Shift the epoch to 0000-03-01 so leap days fall at the end of a year.
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;                                       // [0, 146096]
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  int64_t mp = (5 * doy + 2) / 153;                                     // [0, 11]
  Civil c;
  c.day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.year = yoe + era * 400 + (c.month <= 2 ? 1 : 0);
  c.hour = static_cast<int>(rem / 3600);
  c.minute = static_cast<int>(rem / 60 % 60);
  c.second = static_cast<int>(rem % 60);
  return c;
}

char* put(char* p, int64_t v, int width) {
  for (int i = width - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return p + width;
}

}  // namespace

void format_iso8601(char* out, int64_t sec, int64_t nsec) {
  Civil c = to_civil(sec);
  char* p = out;
  p = put(p, c.year, 4);
  *p++ = '-';
  p = put(p, c.month, 2);
  *p++ = '-';
  p = put(p, c.day, 2);
  *p++ = 'T';
  p = put(p, c.hour, 2);
  *p++ = ':';
  p = put(p, c.minute, 2);
  *p++ = ':';
  p = put(p, c.second, 2);
  *p++ = '.';
  p = put(p, nsec / 1000000, 3);
  *p++ = 'Z';
  *p = '\0';
}

void format_compact(char* out, int64_t sec) {
  Civil c = to_civil(sec);
  char* p = out;
  p = put(p, c.year, 4);
  p = put(p, c.month, 2);
  p = put(p, c.day, 2);
  *p++ = 'T';
  p = put(p, c.hour, 2);
  p = put(p, c.minute, 2);
  p = put(p, c.second, 2);
  *p = '\0';
}

}  // namespace faultline::core
