/* A program whose own handler, installed after a linked faultline, gives a
 * hardware fault back by raising it again (as CPython's faulthandler,
 * abseil's failure signal handler or a server's own crash handler do).
 * Usage: reraiser MODE FAULT
 *   MODE  restore  the handler puts back the action it replaced (faultline's)
 *                  and raises the signal again with raise()
 *         dfl      the handler resets the signal to SIG_DFL and raises it
 *         returned the handler is installed past faultline's interposer
 *                  (libc's own sigaction, as UCX's error handler does); it
 *                  puts back the action it replaced, sends the signal to its
 *                  thread again and returns: the re-raise comes at the
 *                  faulting instruction, with no trampoline on the stack
 *         none     no handler of the program's: the fault reaches faultline
 *         raise    no fault: raise(SIGSEGV) from main, no handler
 *         stale    a first fault that the program's handler jumps out of
 *                  (the thread's trap number and cr2 stay the fault's),
 *                  then faultline's handler back and raise(SIGSEGV)
 *         foreign  the same stale fault, then another thread sends FAULT's
 *                  signal (segv or fpe) to the main thread with
 *                  pthread_kill while it runs a loop of loads (segv) or of
 *                  divisions by 7 (fpe): no fault to rebuild
 *   FAULT bus      SIGBUS: a store to a file mapping past the end of file
 *         fpe      SIGFPE: an integer division by zero
 *         segv     SIGSEGV: a load from address 0x10
 * Prints "handler SIG" to stderr when the handler runs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <faultline/faultline.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct sigaction g_old[65];
static const char* g_mode;
typedef int (*sigaction_fn)(int, const struct sigaction*, struct sigaction*);
static sigaction_fn g_libc_sigaction;
static sigjmp_buf g_back;

static void returning_handler(int sig, siginfo_t* si, void* uc) {
  (void)si;
  (void)uc;
  write(2, "handler returns\n", 16);
  g_libc_sigaction(sig, &g_old[sig], NULL);
  syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

static volatile unsigned long g_x = 123456789, g_y = 7;
static pthread_t g_main;
static int g_foreign_sig;

static void* foreign_sender(void* arg) {
  (void)arg;
  usleep(100 * 1000);
  pthread_kill(g_main, g_foreign_sig);
  return NULL;
}

__attribute__((noinline)) static void busy_loads(void) {
  volatile unsigned long sink[8] = {0};
  for (;;) {
    for (int i = 0; i < 8; ++i) sink[i] += g_x;
  }
}

__attribute__((noinline)) static void busy_divisions(void) {
  unsigned long a = g_x, b = g_y;
  for (;;) {
    // Mostly divisions: where the signal lands is nearly always one.
    __asm__ volatile(
        "xor %%edx,%%edx\n\t"
        ".rept 32\n\tdiv %1\n\t.endr\n\t"
        "mov %2,%%rax"
        : "+a"(a)
        : "r"(b), "r"(g_x)
        : "rdx");
  }
}

static void jumping_handler(int sig) {
  (void)sig;
  siglongjmp(g_back, 1);
}

static void handler(int sig, siginfo_t* si, void* uc) {
  (void)si;
  (void)uc;
  char msg[32];
  int n = snprintf(msg, sizeof msg, "handler %d\n", sig);
  write(2, msg, (size_t)n);
  if (!strcmp(g_mode, "restore")) {
    sigaction(sig, &g_old[sig], NULL);
  } else {
    signal(sig, SIG_DFL);
  }
  raise(sig);
}

__attribute__((noinline)) void bus_fault(void) {
  FILE* f = tmpfile();
  char* p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0);
  if (p == MAP_FAILED) exit(3);
  p[4096] = 1; /* the file is empty: SIGBUS (BUS_ADRERR) */
}

__attribute__((noinline)) int fpe_fault(volatile int d) { return 100 / d; }

__attribute__((noinline)) int segv_fault(void) { return *(volatile int*)0x10; }

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_mode = argv[1];
  if (faultline_install(NULL) != 0) return 2;
  if (!strcmp(g_mode, "raise")) raise(SIGSEGV);
  g_libc_sigaction = (sigaction_fn)dlsym(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), "sigaction");
  if (!g_libc_sigaction) return 5;
  if (!strcmp(g_mode, "stale") || !strcmp(g_mode, "foreign")) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = jumping_handler;
    sigemptyset(&sa.sa_mask);
    g_libc_sigaction(SIGSEGV, &sa, &old);
    if (sigsetjmp(g_back, 1) == 0) segv_fault();
    g_libc_sigaction(SIGSEGV, &old, NULL);
    write(2, "recovered\n", 10);
    if (!strcmp(g_mode, "stale")) {
      raise(SIGSEGV);
      return 6;
    }
    g_main = pthread_self();
    g_foreign_sig = !strcmp(argv[2], "fpe") ? SIGFPE : SIGSEGV;
    pthread_t t;
    pthread_create(&t, NULL, foreign_sender, NULL);
    if (g_foreign_sig == SIGFPE) busy_divisions();
    busy_loads();
    return 7;
  }
  if (!strcmp(g_mode, "returned")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = returning_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGBUS, SIGFPE, SIGSEGV};
    for (int i = 0; i < 3; ++i) g_libc_sigaction(sigs[i], &sa, &g_old[sigs[i]]);
  } else if (strcmp(g_mode, "none")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGBUS, SIGFPE, SIGSEGV};
    for (int i = 0; i < 3; ++i) sigaction(sigs[i], &sa, &g_old[sigs[i]]);
  }
  if (!strcmp(argv[2], "bus")) bus_fault();
  if (!strcmp(argv[2], "fpe")) return fpe_fault(0);
  if (!strcmp(argv[2], "segv")) return segv_fault();
  return 4;
}
