/* A program that installs its own SIGSEGV handler after start-up, without
 * chaining to the one it replaces (run under the preload).
 * Usage: later_handler MODE [COUNT]
 *   torch    PyTorch's DataLoader worker: an SA_NODEFER handler prints
 *            "ERROR: Unexpected segmentation fault encountered in worker.",
 *            resets SIGSEGV to the default and raise()s it; then a null
 *            read in get_item.
 *   redis    redis-server's crash handler (SA_RESETHAND | SA_NODEFER): it
 *            reads /proc/self/maps and says whether the mapping its stack
 *            pointer is in has "stack" in its line (redis's memory test
 *            skips only those), fills a 1 MiB buffer on its stack (as
 *            redis's memory test does), resets SIGSEGV to the default and
 *            kill()s its own process.
 *   recover  COUNT null reads, each recovered by the handler with
 *            siglongjmp; prints "recovered COUNT" and exits 0.
 *   vfork-torch  first a vfork() child resets SIGSEGV and SIGUSR2 to the
 *            default and _exit()s (as a shell or CPython's subprocess does
 *            before exec); then as torch. The child shares the parent's
 *            memory: nothing it does may change the parent's faultline.
 *   rearm    as torch, but the handler first installs a SIGBUS handler
 *            (crash handlers re-arm the other fatal signals), with the
 *            program's malloc saying "malloc in a signal handler" if the
 *            sigaction() call allocates.
 *   query    installs the handler, asks for SIGSEGV's handler with
 *            sigaction(SIGSEGV, NULL, &old) and with signal(); prints
 *            "query: own" when both answer with the program's handler,
 *            else "query: other"; exits 0.
 *   fork-query  installs the handler, then a raw clone() child (no atfork
 *            handlers ran) sets another and prints "fork-query: own" when
 *            the one it replaced is the program's, else "fork-query:
 *            other"; exits with the child's status.
 *   term-restart  an SA_RESTART SIGTERM handler that prints "handled"; says
 *            "ready" and reads stdin once: prints "read N errno E" (a
 *            restarted read returns what the test writes after its
 *            SIGTERM; an interrupted one -1 and EINTR); exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile int g_sink;
static volatile int g_in_handler;

/* The program's malloc: says when called inside rearm's handler (through the
 * sigaction() interposer, the loader's dlsym or dladdr). */
extern void* __libc_malloc(size_t);
void* malloc(size_t n) {
  if (g_in_handler) write(2, "malloc in a signal handler\n", 27);
  return __libc_malloc(n);
}

static void bus_handler(int sig) {
  (void)sig;
}
static sigjmp_buf g_env;

static void say(const char* s) {
  (void)!write(2, s, strlen(s));
}

NOINLINE static int get_item(volatile int* p) {
  return *p;
}

static void torch_handler(int sig, siginfo_t* info, void* uc);

static void rearm_handler(int sig, siginfo_t* info, void* uc) {
  g_in_handler = 1;
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = bus_handler;
  sigaction(SIGBUS, &act, NULL);
  g_in_handler = 0;
  torch_handler(sig, info, uc);
}

static void torch_handler(int sig, siginfo_t* info, void* uc) {
  (void)info;
  (void)uc;
  say("ERROR: Unexpected segmentation fault encountered in worker.\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Whether the maps line holding sp says "stack". */
static const char* stack_line_says_stack(uintptr_t sp) {
  static char buf[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return "unknown";
  size_t n = 0;
  ssize_t r;
  while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
  close(fd);
  buf[n] = '\0';
  for (char* line = buf; line && *line;) {
    char* end = strchr(line, '\n');
    if (end) *end = '\0';
    unsigned long lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && sp >= lo && sp < hi) {
      return strstr(line, "stack") ? "named" : "unnamed";
    }
    line = end ? end + 1 : NULL;
  }
  return "unknown";
}

static void redis_handler(int sig, siginfo_t* info, void* uc) {
  (void)info;
  (void)uc;
  volatile char here = 0;
  say("=== REDIS BUG REPORT START ===\nhandler stack: ");
  say(stack_line_says_stack((uintptr_t)&here));
  say("\n");
  volatile char backup[1 << 20];
  for (size_t i = 0; i < sizeof backup; i += 512) backup[i] = 1;
  say(backup[512] == 1 ? "memory test: passed\n" : "memory test: bad\n");
  struct sigaction act;
  memset(&act, 0, sizeof act);
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_NODEFER | SA_ONSTACK | SA_RESETHAND;
  act.sa_handler = SIG_DFL;
  sigaction(sig, &act, NULL);
  kill(getpid(), sig);
}

static void recover_handler(int sig) {
  (void)sig;
  siglongjmp(g_env, 1);
}

static void term_handler(int sig) {
  (void)sig;
  say("handled\n");
}

static void install(int flags, void (*fn)(int, siginfo_t*, void*)) {
  struct sigaction act;
  memset(&act, 0, sizeof act);
  sigemptyset(&act.sa_mask);
  act.sa_flags = flags | SA_SIGINFO;
  act.sa_sigaction = fn;
  sigaction(SIGSEGV, &act, NULL);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    say("usage: later_handler torch|vfork-torch|rearm|redis|recover|query|fork-query|term-restart [COUNT]\n");
    return 2;
  }
  const char* mode = argv[1];
  if (!strcmp(mode, "vfork-torch")) {
    pid_t child = vfork();
    if (child == 0) {
      signal(SIGSEGV, SIG_DFL);
      signal(SIGUSR2, SIG_DFL);
      _exit(0);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child) return 3;
    mode = "torch";
  }
  if (!strcmp(mode, "rearm")) {
    install(SA_NODEFER, rearm_handler);
    g_sink = get_item(NULL);
  } else if (!strcmp(mode, "torch")) {
    install(SA_NODEFER, torch_handler);
    g_sink = get_item(NULL);
  } else if (!strcmp(mode, "redis")) {
    install(SA_NODEFER | SA_RESETHAND, redis_handler);
    g_sink = get_item(NULL);
  } else if (!strcmp(mode, "recover")) {
    int count = argc > 2 ? atoi(argv[2]) : 1000;
    signal(SIGSEGV, recover_handler);
    int done = 0;
    for (int i = 0; i < count; ++i) {
      if (sigsetjmp(g_env, 1) == 0) {
        g_sink = get_item((volatile int*)(uintptr_t)(16 + (i % 64) * 8));
      } else {
        ++done;
      }
    }
    printf("recovered %d\n", done);
    return 0;
  } else if (!strcmp(mode, "query")) {
    install(0, torch_handler);
    struct sigaction old;
    memset(&old, 0, sizeof old);
    sigaction(SIGSEGV, NULL, &old);
    int own = (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == torch_handler;
    signal(SIGSEGV, recover_handler);
    void (*prev)(int) = signal(SIGSEGV, recover_handler);
    own = own && prev == recover_handler;
    printf("query: %s\n", own ? "own" : "other");
    return 0;
  } else if (!strcmp(mode, "fork-query")) {
    install(0, torch_handler);
    pid_t child = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (child == 0) {
      struct sigaction mine, old;
      memset(&mine, 0, sizeof mine);
      memset(&old, 0, sizeof old);
      mine.sa_handler = recover_handler;
      sigemptyset(&mine.sa_mask);
      sigaction(SIGSEGV, &mine, &old);
      int own = (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == torch_handler;
      say(own ? "fork-query: own\n" : "fork-query: other\n");
      _exit(0);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child) return 3;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
  } else if (!strcmp(mode, "term-restart")) {
    struct sigaction act;
    memset(&act, 0, sizeof act);
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESTART;
    act.sa_handler = term_handler;
    sigaction(SIGTERM, &act, NULL);
    say("ready\n");
    char buf[16];
    ssize_t n = read(0, buf, sizeof buf);
    int e = n < 0 ? errno : 0;
    printf("read %zd errno %d\n", n, e);
    return 0;
  }
  say("unknown mode\n");
  return 2;
}
