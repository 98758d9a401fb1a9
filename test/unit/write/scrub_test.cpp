#include "core/write/scrub.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace faultline::core;

namespace {

std::vector<std::string> scrub(const std::vector<std::string>& argv, const char* extra = "") {
  ArgScrubber s(extra);
  std::vector<std::string> out;
  for (const std::string& a : argv) {
    char buf[256];
    out.emplace_back(buf, s.scrub(a.data(), a.size(), buf, sizeof buf));
  }
  return out;
}

}  // namespace

TEST_CASE("key=value arguments with sensitive keys lose their value") {
  CHECK(scrub({"train.py", "--api-key=sk-123", "--password=hunter2", "--epochs=3"}) ==
        std::vector<std::string>{"train.py", "--api-key=[Filtered]", "--password=[Filtered]",
                                 "--epochs=3"});
  CHECK(scrub({"HF_TOKEN=abc", "-Dauth.secret=x", "PrivateKey=k", "Client_Credentials=c"}) ==
        std::vector<std::string>{"HF_TOKEN=[Filtered]", "-Dauth.secret=[Filtered]",
                                 "PrivateKey=[Filtered]", "Client_Credentials=[Filtered]"});
}

TEST_CASE("a bare sensitive flag filters the next argument only") {
  CHECK(scrub({"job", "--password", "hunter2", "--lr", "0.1"}) ==
        std::vector<std::string>{"job", "--password", "[Filtered]", "--lr", "0.1"});
  CHECK(scrub({"job", "--token"}) == std::vector<std::string>{"job", "--token"});
  // A positional word that merely contains a key is not a flag.
  CHECK(scrub({"tokenizer.json", "x"}) == std::vector<std::string>{"tokenizer.json", "x"});
}

TEST_CASE("URL user info") {
  CHECK(scrub({"--db", "postgres://bob:pw@db:5432/x"}) ==
        std::vector<std::string>{"--db", "postgres://bob:[Filtered]@db:5432/x"});
  CHECK(scrub({"https://ghp_abc@github.com/o/r.git"}) ==
        std::vector<std::string>{"https://[Filtered]@github.com/o/r.git"});
  CHECK(scrub({"http://example.com/a@b", "s3://bucket/key"}) ==
        std::vector<std::string>{"http://example.com/a@b", "s3://bucket/key"});
  CHECK(
      scrub({"--mirror=https://u:p@a.org/x,https://v:q@b.org"}) ==
      std::vector<std::string>{"--mirror=https://u:[Filtered]@a.org/x,https://v:[Filtered]@b.org"});
}

TEST_CASE("extra keys") {
  CHECK(scrub({"--wandb=abc", "--dsn", "x", "--lr=1"}, "wandb,dsn") ==
        std::vector<std::string>{"--wandb=[Filtered]", "--dsn", "[Filtered]", "--lr=1"});
}

TEST_CASE("output is bounded by the buffer") {
  ArgScrubber s("");
  char buf[8];
  std::string a = "--password=" + std::string(100, 'x');
  CHECK(s.scrub(a.data(), a.size(), buf, sizeof buf) == sizeof buf);
}

TEST_CASE("header-shaped values in one or two words") {
  CHECK(scrub({"curl", "-H", "Authorization: Bearer S1", "-H", "Accept: text/plain"}) ==
        std::vector<std::string>{"curl", "-H", "Authorization: [Filtered]", "-H",
                                 "Accept: text/plain"});
  CHECK(scrub({"--header=PRIVATE-TOKEN: S3", "--header", "X-Api-Key: S5"}) ==
        std::vector<std::string>{"--header=PRIVATE-TOKEN: [Filtered]", "--header",
                                 "X-Api-Key: [Filtered]"});
  CHECK(scrub({"Cookie: a=1; b=2", "X-Custom-Key:S6", "proxy-authorization:Basic x"}) ==
        std::vector<std::string>{"Cookie: [Filtered]", "X-Custom-Key:[Filtered]",
                                 "proxy-authorization:[Filtered]"});
  // The value in the next word: `-H "Authorization:" "Bearer S8"`.
  CHECK(scrub({"-H", "Authorization:", "Bearer S8", "-H", "Accept:", "text/plain"}) ==
        std::vector<std::string>{"-H", "Authorization:", "[Filtered]", "-H",
                                 "Accept:", "text/plain"});
  CHECK(scrub({"--header=X-Api-Key: ", "S9", "x"}) ==
        std::vector<std::string>{"--header=X-Api-Key: ", "[Filtered]", "x"});
  CHECK(scrub({"X-Wandb: S7", "X-Trace: 1"}, "wandb") ==
        std::vector<std::string>{"X-Wandb: [Filtered]", "X-Trace: 1"});
  // Not headers: URLs, host:port, times.
  CHECK(
      scrub({"https://token.example.com/x", "localhost:8080", "key:value"}) ==
      std::vector<std::string>{"https://token.example.com/x", "localhost:8080", "key:[Filtered]"});
}

TEST_CASE("every key=value of a query string") {
  CHECK(scrub({"https://h/p?limit=10&api_key=S2", "https://h/p?token=S&x=1#f"}) ==
        std::vector<std::string>{"https://h/p?limit=10&api_key=[Filtered]",
                                 "https://h/p?token=[Filtered]&x=1#f"});
  CHECK(scrub({"--url=https://u:p@h/p?a=1&Secret=S&b=2", "-d", "user=bob&password=S"}) ==
        std::vector<std::string>{"--url=https://u:[Filtered]@h/p?a=1&Secret=[Filtered]&b=2", "-d",
                                 "user=bob&password=[Filtered]"});
  CHECK(scrub({"http://h/?a=1&dsn=S&b=2"}, "dsn") ==
        std::vector<std::string>{"http://h/?a=1&dsn=[Filtered]&b=2"});
  CHECK(scrub({"http://h/?q=a&b"}) == std::vector<std::string>{"http://h/?q=a&b"});
}
