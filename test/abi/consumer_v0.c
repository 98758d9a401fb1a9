/* A program built against faultline 0.1.0 (options_v0.h: no size field).
 * Mode besides "crash":
 *   uninit DIR    install a struct filled by hand, not by faultline_options_init */
#include "options_v0.h"

#include "consumer.h"

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
  faultline_options_init(&opts);
  opts.report_dir = argv[2];
  opts.max_frames = 7;
  if (consumer_report("install", faultline_install(&opts)) != 0) return 3;
  return consumer_recurse(40);
}
