// The Inductor kernel a crash died in, as `faultline symbolize` recorded it
// on the kernel's frame (`inductor_kernel`: its name, and the ATen ops and
// user lines fused into it when Inductor wrote them), in one line for show,
// explain and markdown:
//
//   in cpp_fused_index_mul_relu_0 (from relu at model.py:8; mul, index at model.py:7)
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "report/report.h"

namespace faultline::report {

// The line for a frame's `inductor_kernel`; "" when it has none.
std::string inductor_kernel_text(const nlohmann::json& frame);

// The line for the innermost frame of the crashed thread that has one; "".
std::string crashed_inductor_kernel(const Report& r);

}  // namespace faultline::report
