/* The C half of the frame oracle corpus: one crash per scenario, chosen by
 * argv[1]. Built by test/oracle/test_frames.py at several optimisation levels,
 * with and without frame pointers; gdb reads the core file of each run.
 * NOINLINE keeps the call chains the test expects at -O2/-O3; a few functions
 * are left to the compiler on purpose (inlining, tail calls). */
#define _GNU_SOURCE
#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define USED __attribute__((used))

volatile int sink;
volatile int *volatile null_ptr = 0;

/* null-read: main -> level1 -> level2 -> level3 (faults). */
NOINLINE void level3(void) { sink = *null_ptr; }
NOINLINE void level2(void) { level3(); sink++; }
NOINLINE void level1(void) { level2(); sink++; }

/* bad-fnptr / null-fnptr: main -> dispatch -> apply -> (*f)() with f invalid
 * (0x1) or null. The call pushes a return address into apply and jumps. */
typedef void (*fn_t)(void);
NOINLINE void apply(fn_t f) { f(); sink++; }
NOINLINE void dispatch(fn_t f) { apply(f); sink++; }

/* weak-missing: a call through the PLT to an undefined weak function; the
 * dynamic linker leaves its GOT slot 0 and the PLT stub jumps there. */
extern void corpus_missing_function(void) __attribute__((weak));
NOINLINE void call_missing(void) { corpus_missing_function(); sink++; }

/* inline: a static helper the compiler inlines at -O2 (gdb shows it as an
 * inlined frame; the symbolizer must too). */
static inline void store_through(volatile int *p, int v) { *p = v; }
NOINLINE void with_inlined(int v) { store_through(null_ptr, v); sink++; }

/* tail: tail_caller ends in a call to tail_callee, a jump at -O2. */
NOINLINE void tail_callee(int v) { *null_ptr = v; }
NOINLINE void tail_caller(int v) { sink = v; tail_callee(v + 1); }

/* abort / assert: noreturn calls into libc. */
NOINLINE void do_abort(void) { abort(); }
NOINLINE void do_assert(int v) { assert(v == 42); sink = v; }

/* libc-fault: a fault inside libc reached through the PLT (strlen). */
NOINLINE size_t libc_strlen(const char *s) { return strlen(s) + 1; }

/* vdso: the vDSO's clock_gettime writes through a bad pointer. */
NOINLINE void vdso_fault(void) { clock_gettime(CLOCK_MONOTONIC, (struct timespec *)16); }

/* sighandler: a handler of the program's own faults while running on the
 * signal trampoline's frame. */
NOINLINE void handler_body(int sig) { sink = sig; *null_ptr = sig; }
void on_usr1(int sig) { handler_body(sig); }
NOINLINE void raise_usr1(void) {
  signal(SIGUSR1, on_usr1);
  raise(SIGUSR1);
  sink++;
}

/* qsort / bsearch / pthread_once: the program's callback faults inside libc. */
NOINLINE int bad_compare(const void *a, const void *b) {
  if (*(const int *)a == 7) sink = *null_ptr;
  return *(const int *)a - *(const int *)b;
}
NOINLINE void sort_them(void) {
  int v[64];
  for (int i = 0; i < 64; i++) v[i] = (i * 37) % 64;
  qsort(v, 64, sizeof v[0], bad_compare);
  sink = v[0];
}
NOINLINE void search_them(void) {
  int v[16], key = 7;
  for (int i = 0; i < 16; i++) v[i] = i;
  int *(*volatile search)(const void *, const void *, size_t, size_t,
                          int (*)(const void *, const void *)) = (void *)bsearch;
  sink = search(&key, v, 16, sizeof v[0], bad_compare) != 0;
}
NOINLINE void once_body(void) { *null_ptr = 1; }
NOINLINE void run_once(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, once_body);
  sink++;
}

/* dlopen-call / dlopen-ctor: a dlopened library's function faults, or its
 * constructor faults while dlopen runs it (CORPUS_CTOR_CRASH=1). */
NOINLINE void load_and_call(const char *lib) {
  void *h = dlopen(lib, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    exit(3);
  }
  void (*f)(int) = (void (*)(int))dlsym(h, "corpus_lib_entry");
  f(3);
  sink++;
}

/* jit: code in anonymous executable memory (no module) faults. The code is
 * "mov (%rdi), %eax; ret" called with a null pointer. */
NOINLINE void run_jit(void) {
  static const unsigned char code[] = {0x8b, 0x07, 0xc3};
  void *mem = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) exit(3);
  memcpy(mem, code, sizeof code);
  int (*f)(volatile int *) = (int (*)(volatile int *))mem;
  sink = f(null_ptr);
  sink++;
}

/* overflow: unbounded recursion runs off the end of the stack. */
NOINLINE int recurse(int depth) {
  volatile char pad[256];
  pad[0] = (char)depth;
  return recurse(depth + 1) + pad[0];
}

/* thread: a thread other than main crashes; main waits in pthread_join. */
NOINLINE void thread_crash(void) { *null_ptr = 2; }
NOINLINE void *thread_main(void *arg) {
  (void)arg;
  thread_crash();
  sink++;
  return 0;
}
NOINLINE void start_and_join(void) {
  pthread_t t;
  pthread_create(&t, 0, thread_main, 0);
  pthread_join(t, 0);
}

/* deep: 40 distinct-pc frames of the same function. */
NOINLINE int deep(int n) {
  if (n == 0) return *null_ptr;
  return deep(n - 1) + 1;
}

int main(int argc, char **argv) {
  const char *s = argc > 1 ? argv[1] : "";
  if (!strcmp(s, "null-read")) level1();
  else if (!strcmp(s, "bad-fnptr")) dispatch((fn_t)1);
  else if (!strcmp(s, "null-fnptr")) dispatch((fn_t)0);
  else if (!strcmp(s, "weak-missing")) call_missing();
  else if (!strcmp(s, "inline")) with_inlined(5);
  else if (!strcmp(s, "tail")) tail_caller(5);
  else if (!strcmp(s, "abort")) do_abort();
  else if (!strcmp(s, "assert")) do_assert(argc);
  else if (!strcmp(s, "libc-fault")) sink = (int)libc_strlen((const char *)null_ptr);
  else if (!strcmp(s, "vdso")) vdso_fault();
  else if (!strcmp(s, "sighandler")) raise_usr1();
  else if (!strcmp(s, "qsort")) sort_them();
  else if (!strcmp(s, "bsearch")) search_them();
  else if (!strcmp(s, "pthread-once")) run_once();
  else if (!strcmp(s, "dlopen-call") || !strcmp(s, "dlopen-ctor")) load_and_call(argv[2]);
  else if (!strcmp(s, "jit")) run_jit();
  else if (!strcmp(s, "overflow")) sink = recurse(0);
  else if (!strcmp(s, "thread")) start_and_join();
  else if (!strcmp(s, "deep")) sink = deep(40);
  else {
    fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
  }
  return 0;
}
