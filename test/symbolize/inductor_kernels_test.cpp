// Which Inductor kernel a frame is and what it came from: the call line's
// kernel name, the `// ORIGIN:` blocks Inductor writes into a kernel's source
// under torch._inductor.config.comment_origin (text as torch 2.14 writes
// it), and the annotation of a report's frames over files laid out as the
// Inductor cache lays them out.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "symbolize/inductor_kernel_origins.h"

using faultline::symbolize::annotate_inductor_kernels;
using faultline::symbolize::kernel_name_in_call;
using faultline::symbolize::kernel_origins;
using Json = nlohmann::ordered_json;

namespace {

const char* const kKernelSource = R"(#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const int64_t* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0)
{
    {
                    // ORIGIN:
                    // call_function aten.relu.default seq_nr:-1
                    //   File "/job/model.py", line 8, in forward\\    return torch.relu(y)\\           ~~~~~~~~~~^^^\\
                    // END ORIGIN


                    // ORIGIN:
                    // call_function aten.mul.Tensor seq_nr:-1
                    //   File "/job/train.py", line 3, in step\\    out = model(x)\\  File "/job/model.py", line 7, in forward\\    y = x[idx] * 2\\        ~~~~~~~^~~\\
                    // END ORIGIN

                    auto tmp6 = in_ptr1[static_cast<int64_t>(tmp5)];
    }
}
extern "C"  void  other(float* out_ptr0)
{
                    // ORIGIN:
                    // call_function aten.sum.default seq_nr:-1
                    // END ORIGIN
}
)";

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("the kernel a call line names") {
  CHECK(kernel_name_in_call("        cpp_fused_index_mul_relu_0(arg1_1, arg0_1, buf0)") ==
        "cpp_fused_index_mul_relu_0");
  CHECK(kernel_name_in_call("    cpp_fused_add_1 (x);") == "cpp_fused_add_1");
  CHECK(kernel_name_in_call("cpp_fused_add_1 = async_compile.cpp_pybinding(") == "");
  CHECK(kernel_name_in_call("my_cpp_fused_add_1(x)") == "");
  CHECK(kernel_name_in_call("return x") == "");
}

TEST_CASE("origins of one kernel, innermost user frame of each") {
  int def = 0;
  auto origins = kernel_origins(split(kKernelSource), "kernel", &def);
  CHECK(def == 2);
  REQUIRE(origins.size() == 2);
  CHECK(origins[0].op == "aten.relu.default");
  CHECK(origins[0].file == "/job/model.py");
  CHECK(origins[0].line == 8);
  CHECK(origins[0].function == "forward");
  CHECK(origins[0].code == "return torch.relu(y)");
  CHECK(origins[1].op == "aten.mul.Tensor");
  CHECK(origins[1].file == "/job/model.py");
  CHECK(origins[1].line == 7);
  CHECK(origins[1].code == "y = x[idx] * 2");

  // The next kernel's block is its own; a block without a trace keeps the op.
  auto other = kernel_origins(split(kKernelSource), "other", &def);
  CHECK(def == 21);
  REQUIRE(other.size() == 1);
  CHECK(other[0].op == "aten.sum.default");
  CHECK(other[0].file.empty());

  CHECK(kernel_origins(split(kKernelSource), "missing", &def).empty());
  CHECK(def == 0);
}

TEST_CASE("a torch.compile kernel frame: named by the output code's call, origins from main.cpp") {
  char tmpl[] = "/tmp/faultline-ik-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  std::string so = dir + "/ab/cab.main.so", py = dir + "/xy/cxy.py";
  std::filesystem::create_directories(dir + "/ab");
  std::filesystem::create_directories(dir + "/xy");
  write(so, "not really ELF");
  write(dir + "/ab/cab.main.cpp", kKernelSource);
  write(py,
        "def call(args):\n    buf0 = empty()\n    cpp_fused_index_mul_relu_0(arg1_1, arg0_1, "
        "buf0)\n");
  Json report = Json::parse(R"({"threads": [{"crashed": true, "frames": [
      {"kind": "native", "origin": "inductor", "pc": "0x1", "module": ")" +
                            so + R"(", "symbol": "kernel"},
      {"kind": "native", "origin": "inductor", "pc": "0x2", "module": ")" +
                            so + R"(", "symbol": "_Z9kernel_pyP7_objectS0_"},
      {"kind": "native", "origin": "cpython", "pc": "0x3", "module": "/usr/bin/python3.14"},
      {"kind": "python", "origin": "inductor", "file": ")" +
                            py + R"(", "line": 3, "function": "call"},
      {"kind": "python", "origin": "python", "file": "/job/model.py", "line": 7, "function": "forward"}]}]})");
  CHECK(annotate_inductor_kernels(report) == 1);
  const Json& k = report["threads"][0]["frames"][0]["inductor_kernel"];
  CHECK(k["name"] == "cpp_fused_index_mul_relu_0");
  CHECK(k["call"] == py + ":3");
  CHECK(k["source"] == dir + "/ab/cab.main.cpp");
  CHECK(k["source_line"] == 2);
  REQUIRE(k["origins"].size() == 2);
  CHECK(k["origins"][1]["op"] == "aten.mul.Tensor");
  CHECK(!report["threads"][0]["frames"][1].contains("inductor_kernel"));

  // Without origins in the source, the report says why; with the module
  // gone (the cache removed), it says that, and keeps the name.
  write(dir + "/ab/cab.main.cpp", "extern \"C\"  void  kernel(float* out_ptr0)\n{\n}\n");
  annotate_inductor_kernels(report);
  CHECK(report["threads"][0]["frames"][0]["inductor_kernel"].contains("origins_missing"));
  std::filesystem::remove(so);
  annotate_inductor_kernels(report);
  const Json& gone = report["threads"][0]["frames"][0]["inductor_kernel"];
  CHECK(gone["name"] == "cpp_fused_index_mul_relu_0");
  CHECK(gone["source_error"].get<std::string>().find("is gone") != std::string::npos);
  std::filesystem::remove_all(dir);
}
