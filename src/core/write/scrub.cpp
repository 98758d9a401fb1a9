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

// Whether `c` may be part of an HTTP header's name.
bool header_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// The length of "Name:" and the blanks after it when `s` is shaped like a
// header whose value is a secret (`Authorization: Bearer x`, `PRIVATE-TOKEN:
// x`, `X-Api-Key: x`, `Cookie: a=b`): the key list, and any name ending in
// "key". 0 otherwise (a URL's "https:" is followed by "//").
size_t secret_header_prefix(const char* s, size_t n, const char* extra) {
  size_t name = 0;
  while (name < n && header_name_char(s[name])) ++name;
  if (name == 0 || name >= n || s[name] != ':') return 0;
  if (name + 1 < n && s[name + 1] == '/') return 0;
  bool secret =
      scrub_sensitive_key(s, name, extra) || (name >= 3 && norm(s[name - 3]) == 'k' &&
                                              norm(s[name - 2]) == 'e' && norm(s[name - 1]) == 'y');
  if (!secret) return 0;
  size_t end = name + 1;
  while (end < n && (s[end] == ' ' || s[end] == '\t')) ++end;
  return end;
}

bool query_separator(char c) {
  return c == '?' || c == '&';
}

// Copies `s` with URLs' user info filtered and the value of every
// sensitive key=value after a '?' or '&' (a query string, a form body:
// `?limit=10&api_key=x`) replaced.
void copy_scrubbing_queries(const char* s, size_t n, const char* extra, Out& out) {
  size_t i = 0;
  while (i < n && !query_separator(s[i])) ++i;
  copy_scrubbing_urls(s, i, out);
  while (i < n) {
    out.add(s + i, 1);  // the '?' or '&'
    size_t start = i + 1;
    size_t end = start;
    while (end < n && s[end] != '&') ++end;
    size_t eq = start;
    while (eq < end && s[eq] != '=') ++eq;
    if (eq < end && scrub_sensitive_key(s + start, eq - start, extra)) {
      out.add(s + start, eq + 1 - start);
      out.add(kFiltered);
    } else {
      copy_scrubbing_urls(s + start, end - start, out);
    }
    i = end;
  }
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
  if (size_t h = secret_header_prefix(arg, n, extra_)) {  // `-H "Authorization: x"`
    out.add(arg, h);
    if (h < n) {
      out.add(kFiltered);
    } else {
      filter_next_ = true;  // `-H "Authorization:" "Bearer x"`: the value is the next word
    }
    return out.len;
  }
  // The first '=' of a KEY=VALUE; one after a '?' or '&' is a query's
  // (`https://h/p?token=x&b=1`), scrubbed key by key below.
  size_t eq = n;
  for (size_t i = 0; i < n && !query_separator(arg[i]); ++i) {
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
  if (eq < n) {  // `--header=PRIVATE-TOKEN: x`
    if (size_t h = secret_header_prefix(arg + eq + 1, n - eq - 1, extra_)) {
      out.add(arg, eq + 1 + h);
      if (eq + 1 + h < n) {
        out.add(kFiltered);
      } else {
        filter_next_ = true;
      }
      return out.len;
    }
  }
  if (eq == n && n > 1 && arg[0] == '-' && scrub_sensitive_key(arg, n, extra_)) {
    filter_next_ = true;  // `--password X`: X is the secret
  }
  copy_scrubbing_queries(arg, n, extra_, out);
  return out.len;
}

}  // namespace faultline::core
