/* A program built against layout 1 of faultline_options (options_v1.h):
 * the library it runs with knows more fields. Modes besides "crash":
 *   size N        install with opts.size N (after a proper init)
 *   init-size N   faultline_options_init_sized(&opts, N)
 *   zeroed-after-v0 DIR  a component built against 0.1.0 has run 0.1.0's
 *                 faultline_options_init; then this one installs a zeroed
 *                 struct it forgot to initialise (report_dir DIR) */
#include "options_v1.h"

#include "consumer.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  faultline_options opts;
  if (strcmp(argv[1], "init-size") == 0) {
    memset(&opts, 0x5a, sizeof opts);
    int rc = faultline_options_init_sized(&opts, (size_t)strtoul(argv[2], NULL, 10));
    consumer_report("init", rc);
    return opts.max_frames == 0x5a5a5a5a ? 0 : 4; /* a refused init writes nothing */
  }
  if (strcmp(argv[1], "zeroed-after-v0") == 0) {
    /* 0.1.0's entry point, as a 0.1.0 component in the process calls it. */
    extern void faultline_options_init_v0(void* opts) __asm__("faultline_options_init");
    static char v0_struct[88];
    faultline_options_init_v0(v0_struct);
    memset(&opts, 0, sizeof opts);
    opts.report_dir = argv[2];
    consumer_report("install", faultline_install(&opts));
    return 0;
  }
  faultline_options_init(&opts);
  if (opts.size != FAULTLINE_OPTIONS_SIZE_V1) return 5;
  if (strcmp(argv[1], "size") == 0) {
    opts.size = (size_t)strtoul(argv[2], NULL, 10);
    consumer_report("install", faultline_install(&opts));
    return 0;
  }
  opts.report_dir = argv[2];
  opts.max_frames = 7;
  if (consumer_report("install", faultline_install(&opts)) != 0) return 3;
  return consumer_recurse(40);
}
