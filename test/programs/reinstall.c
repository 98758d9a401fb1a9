/* Installs faultline through the C API, installs it again, then runs out of
 * file descriptors and crashes: the report must still be written, from the
 * descriptors kept in reserve.
 * Usage: reinstall DIR once|again|elsewhere OTHER_DIR
 *   again: faultline_uninstall() and faultline_install() again;
 *   elsewhere: installs to OTHER_DIR, then to DIR again. */
#include <faultline/faultline.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  faultline_options o;
  faultline_options_init(&o);
  o.report_dir = argv[1];
  o.write_stderr = 0;
  if (faultline_install(&o) != 0) return 3;
  if (strcmp(argv[2], "again") == 0) {
    faultline_uninstall();
    if (faultline_install(&o) != 0) return 3;
  } else if (strcmp(argv[2], "elsewhere") == 0) {
    faultline_options other = o;
    other.report_dir = argv[3];
    if (faultline_install(&other) != 0 || faultline_install(&o) != 0) return 3;
  }
  struct rlimit rl = {64, 64};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 4;
  while (open("/dev/null", O_RDONLY) >= 0) {
  }
  *(volatile int*)0 = 1;
  return 0;
}
