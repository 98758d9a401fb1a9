/* A program whose own SIGSEGV handler recovers from faults on a guard page,
 * installed before faultline (linked; faultline_install() after the
 * handler) or after it (FAULTLINE_STAY_IN_FRONT=1 keeps faultline in front).
 * Usage: recovering before|after|none MODE [COUNT]   (none: no faultline)
 *   probe    COUNT guard-page probes recovered with siglongjmp, one fixed by
 *            mprotect (the handler returns and the store is retried), then a
 *            genuine crash at address 0x10: the handler resets SIGSEGV to
 *            the default and returns.
 *   rewrite  COUNT faults recovered by moving the context's pc past the
 *            faulting store (a JVM's way), then the genuine crash.
 *   gc       COUNT times: the page is protected again and the same store,
 *            every register equal, faults on it; the handler unprotects the
 *            page and returns (a collector's write barrier), then the
 *            genuine crash.
 *   guard-unfixed  unfixed, on a guard region (MADV_GUARD_INSTALL) inside a
 *            read-write mapping: the mapping allows the store, and still it
 *            faults (exit 77 where the kernel has no guard regions).
 *   unfixed  the handler returns without fixing anything; on its third
 *            call it gives up with _exit(42).
 *   abort    the genuine crash, for which the handler calls abort().
 *   oneshot  probe with a one-shot handler (SA_RESETHAND) that arms itself
 *            again before each siglongjmp.
 *   nodefer  probe with an SA_NODEFER handler and sigsetjmp(env, 0): the
 *            jump restores no signal mask (SIGSEGV was never blocked); at the
 *            genuine crash it resets SIGSEGV and raises it again at once.
 *   threads  8 threads probe COUNT times each at once, then the genuine crash.
 *   rewrite-threads  8 threads fault COUNT times each at once, recovered as
 *            in rewrite, then the genuine crash.
 *   rewrite-timer  rewrite, with an interval timer (ITIMER_REAL, 10 ms)
 *            running; prints "timer ticking" if it still ticks after the
 *            faults (up to 5 s), else "timer stopped".
 *   threads-crash  8 threads probe without end; the genuine crash comes while
 *            they do.
 * Prints "survived N" once the recoverable faults are behind it (and, with
 * RECOVERING_TIME set, "loop_ns T": their time, for bench/recovered_faults.py). */
#define _GNU_SOURCE
#include <faultline/faultline.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static char* g_page;
static __thread sigjmp_buf g_jmp;
static const char* g_mode = "probe";
static volatile int g_fix; /* probe: fix the page instead of jumping */
static volatile int g_calls;

extern char after_store[];

/* One store whose end is a known address, so the handler can skip it. */
__attribute__((noinline)) void store_rewritten(char* p) {
  __asm__ volatile("movb $1, (%0)\n\t.globl after_store\nafter_store:" : : "r"(p) : "memory");
}

/* gc_store(p): one store to p with every other general register zeroed, so
 * each fault it takes has the same registers. */
void gc_store(char* p);
__asm__(
    ".text\n.globl gc_store\n.type gc_store,@function\ngc_store:\n.cfi_startproc\n"
    "push %rbx\n.cfi_adjust_cfa_offset 8\npush %rbp\n.cfi_adjust_cfa_offset 8\n"
    "push %r12\n.cfi_adjust_cfa_offset 8\npush %r13\n.cfi_adjust_cfa_offset 8\n"
    "push %r14\n.cfi_adjust_cfa_offset 8\npush %r15\n.cfi_adjust_cfa_offset 8\n"
    "xor %eax,%eax\nxor %ebx,%ebx\nxor %ecx,%ecx\nxor %edx,%edx\nxor %esi,%esi\n"
    "xor %ebp,%ebp\nxor %r8d,%r8d\nxor %r9d,%r9d\nxor %r10d,%r10d\nxor %r11d,%r11d\n"
    "xor %r12d,%r12d\nxor %r13d,%r13d\nxor %r14d,%r14d\nxor %r15d,%r15d\n"
    "movb $1,(%rdi)\n"
    "pop %r15\n.cfi_adjust_cfa_offset -8\npop %r14\n.cfi_adjust_cfa_offset -8\n"
    "pop %r13\n.cfi_adjust_cfa_offset -8\npop %r12\n.cfi_adjust_cfa_offset -8\n"
    "pop %rbp\n.cfi_adjust_cfa_offset -8\npop %rbx\n.cfi_adjust_cfa_offset -8\n"
    "ret\n.cfi_endproc\n.size gc_store,.-gc_store\n");

static void install_handler(void);

static void handler(int sig, siginfo_t* si, void* ucv) {
  ucontext_t* uc = ucv;
  char* a = si->si_addr;
  ++g_calls;
  if (a >= g_page && a < g_page + 4096) {
    if (!strcmp(g_mode, "unfixed") || !strcmp(g_mode, "guard-unfixed")) {
      if (g_calls == 3) {
        static const char msg[] = "gave up\n";
        write(2, msg, sizeof msg - 1);
        _exit(42);
      }
      return; /* nothing changed: the store faults again */
    }
    if (!strcmp(g_mode, "gc")) {
      mprotect(g_page, 4096, PROT_READ | PROT_WRITE);
      return; /* the store is retried and succeeds */
    }
    if (!strncmp(g_mode, "rewrite", 7)) {
      uc->uc_mcontext.gregs[REG_RIP] = (greg_t)after_store;
      return;
    }
    if (!strcmp(g_mode, "oneshot")) install_handler();
    if (g_fix) {
      mprotect(g_page, 4096, PROT_READ | PROT_WRITE);
      return;
    }
    siglongjmp(g_jmp, 1);
  }
  if (!strcmp(g_mode, "abort")) abort();
  signal(sig, SIG_DFL); /* not ours: die as without a handler */
  if (!strcmp(g_mode, "nodefer")) raise(sig); /* at once, as faulthandler does */
}

static void install_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | (strcmp(g_mode, "oneshot") ? 0 : SA_RESETHAND) |
                (strcmp(g_mode, "nodefer") ? 0 : SA_NODEFER);
  sigaction(SIGSEGV, &sa, NULL);
}

static int g_count;
static int g_thread_survived[8];

/* RECOVERING_TICKER: a thread that only counts, to show whether the other
 * threads keep running while the handler recovers. */
static volatile long g_ticker_ticks;
static void* ticker(void* arg) {
  (void)arg;
  for (;;) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    ++g_ticker_ticks;
  }
  return NULL;
}

static void* prober(void* arg) {
  int* survived = arg;
  for (int i = 0; g_count < 0 || i < g_count; ++i) {
    if (sigsetjmp(g_jmp, 1) == 0) {
      *(volatile char*)g_page = 1;
    } else {
      ++*survived;
    }
  }
  return NULL;
}

static volatile int g_ticks;
static void on_tick(int sig) {
  (void)sig;
  ++g_ticks;
}

static void* rewriter(void* arg) {
  int* survived = arg;
  for (int i = 0; i < g_count; ++i) {
    store_rewritten(g_page);
    ++*survived;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int before = !strcmp(argv[1], "before");
  g_mode = argv[2];
  int count = argc > 3 ? atoi(argv[3]) : 3;
  int guard = !strcmp(g_mode, "guard-unfixed");
  g_page = mmap(NULL, 4096, guard ? PROT_READ | PROT_WRITE : PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_page == MAP_FAILED) return 2;
  if (guard && madvise(g_page, 4096, 102 /* MADV_GUARD_INSTALL, Linux 6.13 */) != 0) return 77;
  if (before) install_handler();
  if (strcmp(argv[1], "none") && faultline_install(NULL) != 0) return 2;
  if (!before) install_handler();
  int survived = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int ticking = getenv("RECOVERING_TICKER") != NULL;
  if (ticking) {
    pthread_t t;
    pthread_create(&t, NULL, ticker, NULL);
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  if (!strcmp(g_mode, "probe") || !strcmp(g_mode, "oneshot") || !strcmp(g_mode, "nodefer")) {
    int save_mask = strcmp(g_mode, "nodefer") != 0;
    for (int i = 0; i < count; ++i) {
      if (sigsetjmp(g_jmp, save_mask) == 0) {
        *(volatile char*)g_page = 1;
      } else {
        ++survived;
      }
    }
    if (ticking) {
      long before = g_ticker_ticks;
      struct timespec ts = {0, 300000000};
      nanosleep(&ts, NULL);
      printf("%s\n", g_ticker_ticks > before ? "ticking" : "frozen");
    }
    g_fix = 1;
    *(volatile char*)g_page = 1; /* fixed by the handler, then retried */
    mprotect(g_page, 4096, PROT_NONE);
    ++survived;
  } else if (!strcmp(g_mode, "threads") || !strcmp(g_mode, "rewrite-threads")) {
    pthread_t t[8];
    g_count = count;
    void* (*body)(void*) = strcmp(g_mode, "threads") ? rewriter : prober;
    for (int i = 0; i < 8; ++i) pthread_create(&t[i], NULL, body, &g_thread_survived[i]);
    for (int i = 0; i < 8; ++i) {
      pthread_join(t[i], NULL);
      survived += g_thread_survived[i];
    }
  } else if (!strcmp(g_mode, "threads-crash")) {
    pthread_t t[8];
    g_count = -1;
    for (int i = 0; i < 8; ++i) pthread_create(&t[i], NULL, prober, &g_thread_survived[i]);
    while (1) { /* until every thread has recovered from COUNT probes */
      int least = g_thread_survived[0];
      for (int i = 1; i < 8; ++i) least = g_thread_survived[i] < least ? g_thread_survived[i] : least;
      if (least >= count) break;
      usleep(1000);
    }
  } else if (!strcmp(g_mode, "rewrite-timer")) {
    signal(SIGALRM, on_tick);
    struct itimerval every = {{0, 10000}, {0, 10000}};
    setitimer(ITIMER_REAL, &every, NULL);
    for (int i = 0; i < count; ++i) {
      store_rewritten(g_page);
      ++survived;
    }
    int at = g_ticks, waited = 0;
    struct timespec ms10 = {0, 10 * 1000 * 1000};
    while (g_ticks < at + 3 && waited++ < 500) nanosleep(&ms10, NULL);
    printf("timer %s\n", g_ticks >= at + 3 ? "ticking" : "stopped");
  } else if (!strcmp(g_mode, "rewrite")) {
    for (int i = 0; i < count; ++i) {
      store_rewritten(g_page);
      ++survived;
    }
  } else if (!strcmp(g_mode, "gc")) {
    for (int i = 0; i < count; ++i) {
      mprotect(g_page, 4096, PROT_NONE);
      gc_store(g_page);
      ++survived;
    }
  } else if (!strcmp(g_mode, "unfixed") || !strcmp(g_mode, "guard-unfixed")) {
    *(volatile char*)g_page = 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("survived %d\n", survived);
  if (getenv("RECOVERING_TIME")) {
    printf("loop_ns %lld\n", (t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
  }
  fflush(stdout);
  *(volatile int*)16 = 3; /* the genuine crash */
  return 0;
}
