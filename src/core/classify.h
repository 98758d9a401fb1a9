// Frame classification: which layer of the stack a frame belongs to (its
// `origin` in the report: "python", "cpython", "dynamo", "inductor", "fx",
// "triton", "aten", ...). The rules are one data table (classify.cpp), each
// a path or symbol pattern with the origin it gives and the layer it names in
// a diagnosis ("Dynamo guard evaluation").
//
// Async-signal-safe: pure functions over strings, no allocation.
#pragma once

namespace faultline::core {

struct Origin {
  const char* id;     // "dynamo"
  const char* layer;  // "Dynamo guard evaluation" (for the diagnosis)
  bool user;          // user code (the frame a diagnosis names as "while calling")
};

// module: the module path (may be nullptr); symbol: raw, possibly mangled.
const Origin& classify_native(const char* module, const char* symbol);
// file: co_filename; function: co_name (or qualname).
const Origin& classify_python(const char* file, const char* function);

}  // namespace faultline::core
