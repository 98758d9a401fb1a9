/* A program built against faultline 0.1.0 (options_v0.h: no size field).
 * Mode besides "crash":
 *   uninit DIR    install a struct filled by hand, not by faultline_options_init
 *   copy DIR      install a copy (on the heap) of the struct faultline_options_init
 *                 filled, then crash as in "crash" */
#include "options_v0.h"

#include "consumer.h"

/* A settings object a program builds once and hands out by value. */
static faultline_options* defaults_copy(void) {
  faultline_options base;
  faultline_options_init(&base);
  faultline_options* copy = malloc(sizeof *copy);
  if (copy) *copy = base;
  return copy;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  faultline_options opts;
  if (strcmp(argv[1], "uninit") == 0) {
    memset(&opts, 0, sizeof opts);
    opts.report_dir = argv[2];
    opts.max_frames = 7;
    consumer_report("install", faultline_install(&opts));
    return 0;
  }
  if (strcmp(argv[1], "copy") == 0) {
    faultline_options* copy = defaults_copy();
    if (!copy) return 2;
    copy->report_dir = argv[2];
    copy->max_frames = 7;
    if (consumer_report("install", faultline_install(copy)) != 0) return 3;
    return consumer_recurse(40);
  }
  faultline_options_init(&opts);
  opts.report_dir = argv[2];
  opts.max_frames = 7;
  if (consumer_report("install", faultline_install(&opts)) != 0) return 3;
  return consumer_recurse(40);
}
