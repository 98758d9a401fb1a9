// The report's threads (report_threads.h): frames written in one piece
// (the common frame) must be, byte for byte, what the field-by-field path
// writes; a 64-byte buffer leaves no room for a piece and forces that path
// for every frame.
#include "core/write/report_threads.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/diagnosis/classify.h"
#include "json_render.h"

using namespace faultline::core;

namespace {

// The threads of c as write_threads writes them, through a sink buffer of
// bufsize bytes.
std::string render_threads(const Capture& c, size_t bufsize) {
  return render_json(
      [&](JsonWriter& w) {
        w.begin_object();
        write_threads(w, c);
        w.end_object();
      },
      bufsize);
}

Module module_at(uintptr_t bias, const char* path) {
  Module m{};
  m.base = bias;
  m.end = bias + 0x100000;
  m.bias = bias;
  m.path = path;
  return m;
}

}  // namespace

TEST_CASE("frames written in one piece equal the field-by-field ones") {
  static const std::string long_symbol(1500, 'x');  // over the one-piece limit
  static const char deep[] = "deep";                // one pointer for two frames
  Module modules[3] = {module_at(0x555500000000, "/usr/local/bin/app"),
                       module_at(0x7f1000000000, "/opt/lib/\"quoted\"\\dir/libq.so"),
                       module_at(0x7f2000000000, "/usr/lib/libtorch_python.so")};
  const Origin& native = classify_native("/usr/local/bin/app", "main");
  const Origin& dynamo =
      classify_native("/usr/lib/libtorch_python.so", "_ZN5torch6dynamo13TensorGuardsC1Ev");
  NativeFrame frames[] = {
      {0x7f1000001234, 0x7ffc00000100, 1, "read", 0x14, true, &native},   // path needs escaping
      {0x555500000800, 0x7ffc000001f0, 0, "pause", 0x32, true, &native},  // interrupted here
      {0x555500001000, 0x7ffc00000200, 0, deep, 0x2f, false, &native},
      {0x555500001000, 0x7ffc00000220, 0, deep, 0x2f, false, &native},  // the same symbol again
      {0x555500002000, 0x7ffc00000240, 0, "tab\there", 0x3, false, &native},
      {0x555500003000, 0x7ffc00000260, 0, "caf\xc3\xa9", 0x3, false, &native},  // UTF-8
      {0x555500004000, 0x7ffc00000280, 0, "bad\xff", 0x3, false, &native},      // not UTF-8
      {0x555500005000, 0x7ffc000002a0, 0, long_symbol.c_str(), 0x1, false, &native},
      {0x555500006000, 0x7ffc000002c0, 0, nullptr, 0, false, &native},  // no symbol
      {0x7f2000007000, 0x7ffc000002e0, 2, "_ZN5torch6dynamo13TensorGuardsC1Ev", 0x40, false,
       &dynamo},
      {0x12345, 0x7ffc00000300, -1, nullptr, 0, false, &native},  // no module
      {0x555500008000, 0x7ffc00000320, 0, "unclassified", 0x8, false, nullptr},
  };
  ThreadCapture t{};
  t.tid = 42;
  t.captured = true;
  t.frames = frames;
  t.nframes = static_cast<int>(sizeof frames / sizeof frames[0]);
  t.frames_total = t.nframes;
  Capture c{};
  c.modules = {modules, 3, 3, false};
  c.threads = &t;
  c.nthreads = 1;
  c.threads_total = 1;

  std::string fast = render_threads(c, 16384);
  std::string slow = render_threads(c, 64);
  CHECK(fast == slow);
  // Buffers that fill up between frames: some pieces find no room until
  // the buffer is flushed, others go field by field, mixed in one report.
  for (size_t size : {300, 400, 512, 1000, 2500}) {
    CAPTURE(size);
    CHECK(render_threads(c, size) == slow);
  }
  auto j = nlohmann::json::parse(fast);
  auto& out = j["threads"][0]["frames"];
  REQUIRE(out.size() == sizeof frames / sizeof frames[0]);
  CHECK(out[0]["module"] == "/opt/lib/\"quoted\"\\dir/libq.so");
  CHECK(out[0]["signal_frame"] == true);
  CHECK(out[1]["signal_frame"] == true);
  CHECK(out[1]["symbol"] == "pause");
  CHECK(!out[2].contains("signal_frame"));
  CHECK(out[2]["symbol"] == "deep");
  CHECK(out[2]["module_offset"] == "0x1000");
  CHECK(out[3]["sp"] == "0x7ffc00000220");
  CHECK(out[4]["symbol"] == "tab\there");
  CHECK(out[6].contains("symbol_hex"));
  CHECK(out[7]["symbol"].get<std::string>().size() == long_symbol.size());
  CHECK(!out[8].contains("symbol"));
  CHECK(out[9]["origin"] == dynamo.id);
  CHECK(out[10]["module"].is_null());
}
