// The report's threads: each thread's frames (native and Python, merged in
// call order where the walker could), registers and annotations, then the
// Python threads whose native stack was not captured. Part of the JSON
// report (report_writer.h). Async-signal-safe.
#pragma once

#include "core/capture.h"
#include "core/write/json_writer.h"

namespace faultline::core {

// "threads_total", "threads_cut" and "threads".
void write_threads(JsonWriter& w, const Capture& c);

void write_annotations(JsonWriter& w, const AnnotationView* a, int n);

}  // namespace faultline::core
