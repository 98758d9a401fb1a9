// A program that sets a seccomp filter making one system call fatal (or
// strict mode), then crashes. Without faultline it dies by SIGSEGV; with
// it, it must too. Usage:
//   seccompfatal prctl|seccomp ACTION CALL [ACTION CALL ...] [thread]
//   seccompfatal strict
//   seccompfatal badptr     (a filter at a bad address: EFAULT, no filter)
//   seccompfatal refused    (a filter the kernel refuses: BPF_MOD)
//   seccompfatal uninit     (one it refuses: a scratch cell read unwritten)
//   seccompfatal dumprace   (100 idle threads; "ready"; after a byte on stdin
//                            a filter killing uname, then "alive" and exit 0)
// ACTION: kill_process, kill_thread, trap or errno; CALL names a system
// call (see kCalls). Each pair is a filter of its own, set in order (a
// stack of filters). "thread": the crash happens in a second thread while
// the main thread waits in pthread_join.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

static const struct {
  const char* name;
  long nr;
} kCalls[] = {
    {"openat", SYS_openat},   {"tgkill", SYS_tgkill},       {"rt_sigaction", SYS_rt_sigaction},
    {"uname", SYS_uname},     {"mknodat", SYS_mknodat},     {"process_vm_readv", SYS_process_vm_readv},
    {"pipe2", SYS_pipe2},     {"getrandom", SYS_getrandom}, {"rt_tgsigqueueinfo", SYS_rt_tgsigqueueinfo},
};

static __attribute__((noinline)) void crash_now(void) {
  volatile int* p = (volatile int*)16;
  *p = 1;
}

static int add_filter(const char* how, const char* action_name, const char* call);

// Sets a filter the kernel must refuse (EINVAL), then crashes.
static int refused_then_crash(struct sock_filter* f, unsigned short n) {
  struct sock_fprog prog = {n, f};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != -1) return 66;
  crash_now();
  return 0;
}

static void* idle(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static void* worker(void* arg) {
  (void)arg;
  crash_now();
  return NULL;
}

int main(int argc, char** argv) {
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (argc == 2 && !strcmp(argv[1], "strict")) {
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT);
    crash_now();
    return 0;
  }
  if (argc == 2 && !strcmp(argv[1], "badptr")) {
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, (void*)16);
    struct sock_fprog bad = {4, (struct sock_filter*)16};
    int rc2 = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &bad);
    if (rc != -1 || rc2 != -1) return 66;
    crash_now();
    return 0;
  }
  if (argc == 2 && !strcmp(argv[1], "refused")) {
    // Kills uname where nr % 1000 == nr, but BPF_MOD is not seccomp's: EINVAL.
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 1000),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_uname, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    return refused_then_crash(f, sizeof f / sizeof f[0]);
  }
  if (argc == 2 && !strcmp(argv[1], "uninit")) {
    // Kills rt_sigaction, but reads scratch cell 0 before any store: EINVAL.
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_MEM, 0),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigaction, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    return refused_then_crash(f, sizeof f / sizeof f[0]);
  }
  if (argc == 2 && !strcmp(argv[1], "dumprace")) {
    for (int k = 0; k < 100; ++k) {
      pthread_t t;
      pthread_create(&t, NULL, idle, NULL);
    }
    printf("ready\n");
    fflush(stdout);
    char c;
    if (read(0, &c, 1) != 1) return 67;
    int rc = add_filter("prctl", "kill_process", "uname");
    if (rc != 0) return rc;
    sleep(1);
    printf("alive\n");
    fflush(stdout);
    return 0;
  }
  if (argc < 4) return 64;
  int i = 2;
  for (; i + 1 < argc; i += 2) {
    int rc = add_filter(argv[1], argv[i], argv[i + 1]);
    if (rc != 0) return rc;
  }
  if (i < argc && !strcmp(argv[i], "thread")) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    return 0;  // a crash that took only its own thread
  }
  crash_now();
  return 0;
}

// One filter: `action` for system call `call`, allowed otherwise.
static int add_filter(const char* how, const char* action_name, const char* call) {
  unsigned action = !strcmp(action_name, "kill_process") ? SECCOMP_RET_KILL_PROCESS
                    : !strcmp(action_name, "kill_thread") ? SECCOMP_RET_KILL_THREAD
                    : !strcmp(action_name, "trap")        ? SECCOMP_RET_TRAP
                                                          : SECCOMP_RET_ERRNO | 1;
  long nr = -1;
  for (size_t i = 0; i < sizeof kCalls / sizeof kCalls[0]; ++i) {
    if (!strcmp(call, kCalls[i].name)) nr = kCalls[i].nr;
  }
  if (nr < 0) return 64;
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, action),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  int rc = !strcmp(how, "prctl") ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)
                                 : (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
  if (rc != 0) {
    perror("seccomp");
    return 65;
  }
  return 0;
}
