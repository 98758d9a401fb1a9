// Process-wide crash keys (annotations.h): lookups and the crash's snapshot
// read the table only up to the highest slot ever claimed; a key in a slot
// far up, or one set again after the slots below it were freed, must still
// be found and must not be stored twice.
#include "core/capture/annotations.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace faultline::core;

namespace {

std::map<std::string, std::string> snapshot() {
  AnnotationView views[kMaxAnnotations];
  static char storage[kMaxAnnotations * (kAnnotationKeyBytes + kAnnotationValueBytes)];
  int n = annotations_snapshot(views, kMaxAnnotations, storage, sizeof storage);
  std::map<std::string, std::string> out;
  for (int i = 0; i < n; ++i) {
    CHECK(out.count(views[i].key) == 0);  // each key once
    out[views[i].key] = views[i].value;
  }
  return out;
}

}  // namespace

TEST_CASE("keys in the table's upper slots are found after the lower ones are freed") {
  constexpr int kKeys = kMaxAnnotations - 2;
  for (int i = 0; i < kKeys; ++i) {
    std::string k = "key" + std::to_string(i);
    REQUIRE(annotation_set(k.c_str(), "v") == 0);
  }
  for (int i = 0; i < kKeys - 1; ++i) {
    std::string k = "key" + std::to_string(i);
    REQUIRE(annotation_set(k.c_str(), nullptr) == 0);
  }
  const std::string last = "key" + std::to_string(kKeys - 1);
  CHECK(snapshot() == std::map<std::string, std::string>{{last, "v"}});
  // A new key takes the first free slot; the last one is replaced in place.
  REQUIRE(annotation_set("fresh", "1") == 0);
  REQUIRE(annotation_set(last.c_str(), "w") == 0);
  CHECK(snapshot() == std::map<std::string, std::string>{{last, "w"}, {"fresh", "1"}});
  // Every slot used, then one more: the table is full.
  for (int i = 0; i < kMaxAnnotations - 2; ++i) {
    std::string k = "fill" + std::to_string(i);
    REQUIRE(annotation_set(k.c_str(), "x") == 0);
  }
  CHECK(annotation_set("one-too-many", "x") == -ENOSPC);
  CHECK(snapshot().size() == static_cast<size_t>(kMaxAnnotations));
  for (auto& kv : snapshot()) CHECK(annotation_set(kv.first.c_str(), nullptr) == 0);
  CHECK(snapshot().empty());
}
