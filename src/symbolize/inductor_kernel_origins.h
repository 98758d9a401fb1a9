// Which Inductor kernel a native frame is, and what it came from (offline,
// part of `faultline symbolize`).
//
// Inductor's C++ kernels are `cpp_fused_<ops>_<n>`. Under torch.compile the
// compiled module names its function `kernel` and only the output code knows
// the name: the line of the output code's Python frame that called the
// kernel (`cpp_fused_index_mul_relu_0(arg1_1, arg0_1, buf0)`). AOTInductor
// keeps the name as the symbol. The kernel's generated source (`<hash>.main.cpp`
// beside the module, or the `.kernel.cpp` the line table names) carries, only
// when the model was compiled with `torch._inductor.config.comment_origin`,
// one `// ORIGIN:` block per FX node fused into the kernel: its ATen op and
// the user's file, line and code.
//
// annotate_inductor_kernels() adds to each such frame an `inductor_kernel`
// object: `name`, `call` ("file:line" of the call, where known), `source`
// and `source_line` (the kernel's definition), `origins` ([{op, file, line,
// function, code}], innermost node first, as Inductor wrote them) or
// `origins_missing` (why there are none), and `source_error` when the
// generated source cannot be read (the cache was removed). Running it again
// replaces the objects.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace faultline::symbolize {

struct KernelOrigin {
  std::string op;  // aten.relu.default
  std::string file;
  int line = 0;
  std::string function;
  std::string code;
};

// The `// ORIGIN:` blocks of the kernel defined at or after line `from`
// (1-based) of a generated source's lines, up to the next extern "C"
// definition; `definition` gets the definition's line (0 if not found).
// `name` is the kernel's function name (`kernel` under torch.compile).
std::vector<KernelOrigin> kernel_origins(const std::vector<std::string>& lines,
                                         const std::string& name, int* definition);

// The kernel name a call line names (`cpp_fused_..._N(`), or "".
std::string kernel_name_in_call(const std::string& line);

// Returns how many frames were annotated.
int annotate_inductor_kernels(nlohmann::ordered_json& report);

}  // namespace faultline::symbolize
