/* Runs a program with system calls denied by a seccomp filter, the way some
 * container runtimes (or filesystems that lack a feature) make them fail.
 * Usage: seccomp_launcher [-d NR:ERRNO]... PROG ARGS...
 * Without -d: process_vm_readv(2) fails with EPERM. `-d 316:22 -d 265:1`
 * (renameat2 EINVAL, linkat EPERM) behaves like vfat for a report's publish.
 * A raw BPF filter: no libseccomp needed at run time. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { kMaxDenied = 8 };

int main(int argc, char** argv) {
  unsigned nr[kMaxDenied], err[kMaxDenied];
  int n = 0, arg = 1;
  for (; arg + 1 < argc && !strcmp(argv[arg], "-d") && n < kMaxDenied; arg += 2, ++n) {
    if (sscanf(argv[arg + 1], "%u:%u", &nr[n], &err[n]) != 2) {
      fprintf(stderr, "bad -d %s (NR:ERRNO)\n", argv[arg + 1]);
      return 2;
    }
  }
  if (n == 0) {
    nr[0] = __NR_process_vm_readv;
    err[0] = EPERM;
    n = 1;
  }
  if (arg >= argc) {
    fprintf(stderr, "usage: %s [-d NR:ERRNO]... PROG ARGS...\n", argv[0]);
    return 2;
  }
  struct sock_filter filter[4 + 2 * kMaxDenied + 1];
  int k = 0;
  filter[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                             offsetof(struct seccomp_data, arch));
  filter[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
  filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  filter[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                             offsetof(struct seccomp_data, nr));
  for (int i = 0; i < n; ++i) {
    filter[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr[i], 0, 1);
    filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                               SECCOMP_RET_ERRNO | (err[i] & SECCOMP_RET_DATA));
  }
  filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  struct sock_fprog prog = {(unsigned short)k, filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("seccomp");
    return 3;
  }
  execv(argv[arg], argv + arg);
  perror("execv");
  return 4;
}
