#include "core/write/scrub.h"

#include "core/base/str.h"

namespace faultline::core {
namespace {

// Sensitive words, normalised (lower case, '_' between words). Matched
// anywhere in a key: "--db-password", "HF_TOKEN", "x-api-key".
// Text, not pointers: no relocation of the table at load.
const char kSensitive[][16] = {"password",   "passwd",      "pwd",        "secret",
                               "token",      "api_key",     "apikey",     "auth",
                               "credential", "private_key", "privatekey", "access_key",
                               "accesskey",  "session_key", "cookie"};

char norm(char c) {
  if (c >= 'A' && c <= 'Z') return static_cast<char>(c - 'A' + 'a');
  if (c == '-' || c == '.') return '_';
  return c;
}

// Whether `word` (normalised, `wn` bytes) occurs in the normalised key.
bool contains(const char* key, size_t n, const char* word, size_t wn) {
  if (wn == 0 || wn > n) return false;
  for (size_t i = 0; i + wn <= n; ++i) {
    size_t k = 0;
    while (k < wn && norm(key[i + k]) == norm(word[k])) ++k;
    if (k == wn) return true;
  }
  return false;
}

struct Out {
  char* buf;
  size_t cap;
  size_t len = 0;
  void add(const char* s, size_t n) {
    for (size_t i = 0; i < n && len < cap; ++i) buf[len++] = s[i];
  }
  void add(const char* s) { add(s, str_len(s)); }
};

bool authority_end(char c) {
  return c == '/' || c == '?' || c == '#' || c == ' ';
}

// Copies `s` with the user info of every URL in it filtered.
void copy_scrubbing_urls(const char* s, size_t n, Out& out) {
  size_t i = 0;
  while (i < n) {
    const char* scheme_end = str_find(s + i, n - i, "://");
    if (!scheme_end) break;
    size_t auth = static_cast<size_t>(scheme_end - s) + 3;
    size_t end = auth;
    while (end < n && !authority_end(s[end])) ++end;
    size_t at = end;
    for (size_t k = auth; k < end; ++k) {
      if (s[k] == '@') at = k;
    }
    out.add(s + i, auth - i);
    if (at == end) {
      i = auth;
      continue;
    }
    size_t colon = at;
    for (size_t k = auth; k < at; ++k) {
      if (s[k] == ':') {
        colon = k;
        break;
      }
    }
    if (colon < at) out.add(s + auth, colon + 1 - auth);  // the user name stays
    out.add(kFiltered);
    i = at;  // from the '@' on
  }
  out.add(s + i, n - i);
}

}  // namespace

bool scrub_sensitive_key(const char* key, size_t n, const char* extra_keys) {
  for (const char* w : kSensitive) {
    if (contains(key, n, w, str_len(w))) return true;
  }
  // Extra keys: comma-separated.
  const char* p = extra_keys ? extra_keys : "";
  while (*p) {
    const char* e = p;
    while (*e && *e != ',') ++e;
    if (contains(key, n, p, static_cast<size_t>(e - p))) return true;
    p = *e ? e + 1 : e;
  }
  return false;
}

size_t ArgScrubber::scrub(const char* arg, size_t n, char* buf, size_t cap) {
  Out out{buf, cap};
  if (filter_next_) {
    filter_next_ = false;
    out.add(kFiltered);
    return out.len;
  }
  size_t eq = n;
  for (size_t i = 0; i < n; ++i) {
    if (arg[i] == '=') {
      eq = i;
      break;
    }
  }
  if (eq < n && scrub_sensitive_key(arg, eq, extra_)) {
    out.add(arg, eq + 1);
    out.add(kFiltered);
    return out.len;
  }
  if (eq == n && n > 1 && arg[0] == '-' && scrub_sensitive_key(arg, n, extra_)) {
    filter_next_ = true;  // `--password X`: X is the secret
  }
  copy_scrubbing_urls(arg, n, out);
  return out.len;
}

}  // namespace faultline::core
