/* Runs a command where ptrace(2) fails with EPERM, as under Yama's
 * ptrace_scope 3 or in a container without CAP_SYS_PTRACE: a seccomp
 * filter, inherited by the command.
 *   noptrace COMMAND [ARG...] */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: noptrace COMMAND [ARG...]\n");
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ptrace), 0) != 0 ||
      seccomp_load(ctx) != 0) {
    fprintf(stderr, "noptrace: cannot load the seccomp filter\n");
    return 2;
  }
  execvp(argv[1], argv + 1);
  perror("noptrace: exec");
  return 127;
}
