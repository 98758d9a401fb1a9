// The public C API that is safe to call anywhere, signal handlers included.
#include "core/annotations.h"
#include "faultline/faultline.h"

extern "C" {

int faultline_annotate(const char* key, const char* value) {
  return faultline::core::annotation_set(key, value);
}

int faultline_thread_annotate(const char* key, const char* value) {
  return faultline::core::thread_annotation_set(key, value);
}

void faultline_breadcrumb(const char* message) {
  faultline::core::breadcrumb_add(message);
}

}  // extern "C"
