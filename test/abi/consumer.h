/* What the ABI consumers share: each is built against one layout of
 * faultline_options (consumer_v0.c, consumer_v1.c, consumer_current.c) and
 * run against the library of this tree by test_abi.py.
 *
 *   consumer crash DIR   install with report_dir DIR and max_frames 7, then
 *                        crash 40 calls deep
 * plus the modes of each consumer. Prints what install returned. */
#ifndef FAULTLINE_TEST_CONSUMER_H_
#define FAULTLINE_TEST_CONSUMER_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile int* volatile consumer_null;
static volatile int consumer_depth;

__attribute__((noinline)) static int consumer_recurse(int n) {
  consumer_depth = n;
  if (n == 0) return *consumer_null;
  return consumer_recurse(n - 1) + n; /* not a tail call: every level keeps a frame */
}

static int consumer_report(const char* what, int rc) {
  printf("%s %d\n", what, rc);
  fflush(stdout);
  return rc;
}

#endif
