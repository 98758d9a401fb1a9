// The public C API that is safe to call anywhere, signal handlers included.
#include <errno.h>

#include "core/base/raw_log.h"
#include "core/capture/annotations.h"
#include "core/crash_state.h"
#include "faultline/faultline.h"

extern "C" {

int faultline_annotate(const char* key, const char* value) {
  return faultline::core::annotation_set(key, value);
}

int faultline_thread_annotate(const char* key, const char* value) {
  return faultline::core::thread_annotation_set(key, value);
}

int faultline_set_text_fd(int fd) {
  if (fd < 0) return -EBADF;
  faultline::core::raw_log_set_fd(fd);
  return 0;
}

void faultline_breadcrumb(const char* message) {
  faultline::core::breadcrumb_add(message);
}

void faultline_callback_add(faultline_callback_writer* writer, const char* key, const char* value) {
  auto* w = reinterpret_cast<faultline::core::CallbackWriter*>(writer);
  if (!w || !key || w->count >= faultline::core::CallbackWriter::kMax) return;
  const char* k = w->arena->dup(key, FAULTLINE_KEY_MAX);
  const char* v = w->arena->dup(value ? value : "", FAULTLINE_CALLBACK_VALUE_MAX);
  if (k && v) w->items[w->count++] = {k, v};
}

}  // extern "C"
