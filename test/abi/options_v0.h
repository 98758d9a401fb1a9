/* faultline_options as faultline 0.1.0 published it (no size field), with
 * the two functions that take it, frozen: a program built against 0.1.0 is
 * built against exactly this. Never edit. */
#ifndef FAULTLINE_TEST_OPTIONS_V0_H_
#define FAULTLINE_TEST_OPTIONS_V0_H_

#include <stddef.h>

typedef struct faultline_callback_writer faultline_callback_writer;
typedef void (*faultline_crash_callback)(faultline_callback_writer* writer, void* user_data);

typedef struct faultline_options {
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

void faultline_options_init(faultline_options* opts);
int faultline_install(const faultline_options* opts);

#endif
