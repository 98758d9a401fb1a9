/* A program built against this tree's faultline.h. Modes besides "crash"
 * (which also sets minidump to 1, a field layout 1 did not have):
 *   bigger zero|set   install a struct 16 bytes bigger than this layout, as a
 *                     newer faultline.h would make, its extra bytes zero or not */
#include <faultline/faultline.h>

#include "consumer.h"

struct bigger {
  faultline_options opts;
  unsigned char newer[16];
};

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (strcmp(argv[1], "bigger") == 0) {
    struct bigger b;
    memset(&b, 0, sizeof b);
    if (faultline_options_init_sized(&b.opts, sizeof b) != 0) return 4;
    if (strcmp(argv[2], "set") == 0) b.newer[3] = 1;
    consumer_report("install", faultline_install(&b.opts));
    return 0;
  }
  faultline_options opts;
  faultline_options_init(&opts);
  if (opts.size != sizeof opts) return 5;
  opts.report_dir = argv[2];
  opts.max_frames = 7;
  opts.minidump = 1;
  if (consumer_report("install", faultline_install(&opts)) != 0) return 3;
  return consumer_recurse(40);
}
