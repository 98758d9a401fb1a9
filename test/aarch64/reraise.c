/* A program whose own handler, installed after the preloaded faultline
 * with libc's own sigaction (past faultline's interposer, so it runs
 * before faultline's handler), gives a fault back by putting back the
 * action it replaced (faultline's) and raising the signal again from
 * inside the handler, as a server's crash handler does: argv[1] "siginfo"
 * installs it with SA_SIGINFO, "plain" without (the kernel's frame then
 * holds no siginfo), "none" installs no handler (the oracle: the same
 * fault reported directly). The fault: a load from address 0x10 in
 * fault_here. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn g_libc_sigaction;
static struct sigaction g_old;

static void plain_handler(int sig) {
  write(2, "handler\n", 8);
  g_libc_sigaction(sig, &g_old, NULL);
  raise(sig);
}

static void siginfo_handler(int sig, siginfo_t *si, void *uc) {
  (void)si;
  (void)uc;
  plain_handler(sig);
}

__attribute__((noinline)) int fault_here(void) { return *(volatile int *)0x10; }

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  g_libc_sigaction = (sigaction_fn)dlsym(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), "sigaction");
  if (!g_libc_sigaction) return 3;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NODEFER;
  if (strcmp(argv[1], "siginfo") == 0) {
    sa.sa_sigaction = siginfo_handler;
    sa.sa_flags |= SA_SIGINFO;
  } else {
    sa.sa_handler = plain_handler;
  }
  if (strcmp(argv[1], "none") != 0) g_libc_sigaction(SIGSEGV, &sa, &g_old);
  return fault_here();
}
