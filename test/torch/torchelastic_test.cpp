// The TORCHELASTIC_ERROR_FILE writer on a hand-made capture: a crash in an
// ATen kernel called from FX graph code. The file must be the JSON that
// torch.distributed.elastic reads (checked here with nlohmann, and against
// the real torch by test_torchelastic_format.py, which runs this program as
// `torch_unit_tests --elastic-file PATH`).
#include "core/write/torchelastic.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/crash_state.h"

using namespace faultline::core;

namespace {

Module g_modules[2];
NativeFrame g_frames[3];
PyFrame g_py[2];
PyThread g_pythread;
ThreadCapture g_thread;
Capture g_capture;

const Capture& sample_capture() {
  g_modules[0] = {};
  g_modules[0].base = 0x7f0000000000;
  g_modules[0].end = 0x7f0001000000;
  g_modules[0].bias = 0x7f0000000000;
  g_modules[0].path = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13";
  g_modules[1] = {};
  g_modules[1].base = 0x7f1000000000;
  g_modules[1].end = 0x7f1001000000;
  g_modules[1].bias = 0x7f1000000000;
  g_modules[1].path = "/usr/bin/python3.11";
  g_frames[0] = {0x7f0000001234, 0, 0, nullptr, 0, true, nullptr};
  g_frames[1] = {0x7f0000005678, 0, 0, "_ZN2at6native3sumERKNS_6TensorE", 0x40, false, nullptr};
  g_frames[2] = {0x7f1000000100, 0, 1, "_PyEval_EvalFrameDefault", 0x100, false, nullptr};
  g_thread = {};
  g_thread.tid = 4242;
  g_thread.crashed = true;
  g_thread.captured = true;
  g_thread.nframes = 3;
  g_thread.frames_total = 3;
  g_thread.frames = g_frames;
  g_py[0] = {};
  g_py[0].file = "<eval_with_key>.0";
  g_py[0].function = "forward";
  g_py[0].line = 5;
  g_py[1] = {};
  g_py[1].file = "/work/job \"quoted\".py";
  g_py[1].function = "main";
  g_py[1].line = 42;
  g_pythread = {};
  g_pythread.native_tid = 4242;
  g_pythread.nframes = 2;
  g_pythread.frames_total = 2;
  g_pythread.frames = g_py;
  std::memset(&g_capture, 0, sizeof g_capture);
  g_capture.kind = CaptureKind::kCrash;
  g_capture.signo = 11;
  g_capture.pid = 4242;
  g_capture.tid = 4242;
  g_capture.time_sec = 1764483000;
  g_capture.modules.items = g_modules;
  g_capture.modules.count = 2;
  g_capture.modules.capacity = 2;
  g_capture.threads = &g_thread;
  g_capture.nthreads = 1;
  g_capture.python.present = true;
  g_capture.python.nthreads = 1;
  g_capture.python.threads = &g_pythread;
  std::strcpy(g_capture.summary,
              "SIGSEGV (address not mapped to object at 0x7f3a00000000) in an ATen operator "
              "(libtorch_cpu.so.1.13) while running forward at <eval_with_key>.0:5");
  g_capture.category = "memory-access";
  std::strcpy(g_capture.signature, "0123456789abcdef");
  return g_capture;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

// For test_torchelastic_format.py: writes the sample capture's error file.
int write_sample_elastic_file(const char* path) {
  torchelastic_set_error_file(path);
  return write_torchelastic_error_file(sample_capture(), "/var/crash", "faultline-x.json") ? 0 : 1;
}

TEST_CASE("disabled without a path") {
  torchelastic_set_error_file(nullptr);
  CHECK_FALSE(torchelastic_enabled());
  CHECK_FALSE(write_torchelastic_error_file(sample_capture()));
  torchelastic_set_error_file("");
  CHECK_FALSE(torchelastic_enabled());
}

TEST_CASE("the error file torch.distributed.elastic reads") {
  char dir[] = "/tmp/faultline-elastic-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/error.json";
  torchelastic_set_error_file(path.c_str());
  REQUIRE(torchelastic_enabled());
  REQUIRE(write_torchelastic_error_file(sample_capture(), "/var/crash", "faultline-x.json"));
  nlohmann::json j = nlohmann::json::parse(slurp(path));
  const auto& m = j.at("message");
  CHECK(m.at("message").get<std::string>() == g_capture.summary);
  CHECK(m.at("extraInfo").at("timestamp").get<std::string>() == "1764483000");
  std::string stack = m.at("extraInfo").at("py_callstack").get<std::string>();
  CAPTURE(stack);
  CHECK(stack.find(g_capture.summary) != std::string::npos);
  CHECK(stack.find("File \"<eval_with_key>.0\", line 5, in forward  [fx]") != std::string::npos);
  CHECK(stack.find("File \"/work/job \"quoted\".py\", line 42, in main  [python]") !=
        std::string::npos);
  CHECK(stack.find("#0 libtorch_cpu.so.1.13+0x1234  [aten]") != std::string::npos);
  CHECK(stack.find("#1 libtorch_cpu.so.1.13!_ZN2at6native3sumERKNS_6TensorE+0x40  [aten]") !=
        std::string::npos);
  CHECK(stack.find("[cpython]") != std::string::npos);
  CHECK(stack.find("faultline report: /var/crash/faultline-x.json") != std::string::npos);
  // Written under a temporary name, then renamed: nothing else is left behind.
  CHECK(access((path + ".faultline-tmp").c_str(), F_OK) != 0);
  // A second crash report (a forked child, say) replaces the file whole.
  REQUIRE(write_torchelastic_error_file(sample_capture()));
  CHECK(nlohmann::json::parse(slurp(path))
            .at("message")
            .at("extraInfo")
            .at("py_callstack")
            .get<std::string>()
            .find("faultline report:") == std::string::npos);
  unlink(path.c_str());
  rmdir(dir);
  torchelastic_set_error_file(nullptr);
}

TEST_CASE("a relative path is made absolute at install") {
  char dir[] = "/tmp/faultline-elastic-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  char old[4096];
  REQUIRE(getcwd(old, sizeof old) != nullptr);
  REQUIRE(chdir(dir) == 0);
  torchelastic_set_error_file("err.json");
  REQUIRE(chdir("/") == 0);
  REQUIRE(write_torchelastic_error_file(sample_capture()));
  std::string path = std::string(dir) + "/err.json";
  CHECK(access(path.c_str(), F_OK) == 0);
  unlink(path.c_str());
  rmdir(dir);
  REQUIRE(chdir(old) == 0);
  torchelastic_set_error_file(nullptr);
}

TEST_CASE("an unwritable location fails quietly") {
  torchelastic_set_error_file("/nonexistent-dir/err.json");
  CHECK_FALSE(write_torchelastic_error_file(sample_capture()));
  torchelastic_set_error_file(nullptr);
}
