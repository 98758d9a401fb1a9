// Secrets out of command lines, on the crash path (no heap, no locale).
//
//   ArgScrubber s(extra_keys);           // extra_keys: "a,b", lower case, or ""
//   for each argument a: n = s.scrub(a, len, out, sizeof out);
//
// What is filtered, as Sentry's server scrubs by default: the value of
// KEY=VALUE when KEY contains a sensitive word (password, secret, token,
// api_key, auth, credential, private_key, ... and the extra keys; case and
// '-' vs '_' do not matter), the argument after a bare sensitive flag
// (`--password X`), the password (or the whole user info when there is
// no password) of URLs (`https://user:pw@host`), the value of every
// sensitive key after a '?' or '&' (`?limit=10&api_key=X`), and the value
// of a header-shaped argument whose name is sensitive or ends in "key"
// (`Authorization: X`, `--header=PRIVATE-TOKEN: X`). The replaced text
// reads "[Filtered]".
#pragma once

#include <stddef.h>

namespace faultline::core {

inline constexpr const char* kFiltered = "[Filtered]";

class ArgScrubber {
 public:
  explicit ArgScrubber(const char* extra_keys) : extra_(extra_keys ? extra_keys : "") {}
  // Writes the scrubbed form of one argument to `out` (at most `cap` bytes,
  // not terminated); returns its length. Arguments are given in order: a
  // sensitive bare flag filters the next one.
  size_t scrub(const char* arg, size_t n, char* out, size_t cap);

 private:
  const char* extra_;
  bool filter_next_ = false;
};

// Whether `key` (any case, '-', '.' or '_' between words) names a secret.
bool scrub_sensitive_key(const char* key, size_t n, const char* extra_keys);

}  // namespace faultline::core
