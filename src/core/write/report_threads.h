// The report's threads: each thread's frames (native and Python, merged in
// call order where the walker could), registers and annotations, then the
// Python threads whose native stack was not captured. Part of the JSON
// report (report_writer.h). Async-signal-safe.
#pragma once

#include "core/capture.h"
#include "core/write/json_writer.h"

namespace faultline::core {

// A thread's "unwinder" as reports name it ("cfi", "cfi+frame-pointer", ...).
const char* unwinder_name(Unwinder u);

// "threads_total", "threads_cut" and "threads".
void write_threads(JsonWriter& w, const Capture& c);

// "annotations": {key: value, ...}; "breadcrumbs": [{"time", "message"}, ...].
void write_annotations(JsonWriter& w, const AnnotationView* a, int n);
void write_breadcrumbs(JsonWriter& w, const BreadcrumbView* b, int n);

}  // namespace faultline::core
