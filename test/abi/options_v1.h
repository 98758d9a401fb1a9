/* faultline_options at layout 1, the first with a size field
 * (FAULTLINE_OPTIONS_SIZE_V1), with the functions that take it, frozen: a
 * program built against that faultline.h is built against exactly this.
 * Never edit. */
#ifndef FAULTLINE_TEST_OPTIONS_V1_H_
#define FAULTLINE_TEST_OPTIONS_V1_H_

#include <stddef.h>

typedef struct faultline_callback_writer faultline_callback_writer;
typedef void (*faultline_crash_callback)(faultline_callback_writer* writer, void* user_data);

typedef struct faultline_options {
  size_t size;
  const char* report_dir;
  unsigned long long signals;
  int write_stderr;
  int max_frames;
  int watchdog_seconds;
  size_t arena_bytes;
  int max_threads;
  int thread_signal;
  int thread_timeout_ms;
  int dump_signal;
  int dump_after_seconds;
  int exit_after_dump;
  int thread_altstacks;
  int stay_in_front;
  faultline_crash_callback callback;
  void* callback_data;
} faultline_options;

#define FAULTLINE_OPTIONS_SIZE_V1 96

int faultline_options_init_sized(faultline_options* opts, size_t size);
#define faultline_options_init(opts) faultline_options_init_sized((opts), sizeof *(opts))
int faultline_install(const faultline_options* opts);

#endif
