/* Multi-threaded crash scenarios for the hostile-conditions tests.
 *   threads MODE [N]
 * Modes: many N (N waiting threads, main crashes), worker-overflow,
 * blocked (a thread with every signal blocked), unanswering (a thread
 * that never takes a signal: it waits for a vfork child), simultaneous N (N threads
 * crash at once), malloc-busy (a thread hammers malloc while main crashes),
 * double-free (abort inside free), fd-exhaust, fork-child, exec ARGS...,
 * dump-wait N (threads wait; the test sends dump signals; exits 0 on stdin EOF). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static pthread_barrier_t g_barrier;
static volatile int g_sink;
static volatile int* volatile g_null;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

NOINLINE void wait_forever_in_cond(void) {
  pthread_mutex_lock(&g_lock);
  for (;;) pthread_cond_wait(&g_cond, &g_lock);
}
NOINLINE void wait_forever_in_sleep(void) {
  for (;;) sleep(100);
}
NOINLINE void wait_forever_in_read(void) {
  int fds[2];
  char c;
  if (pipe(fds) == 0) (void)!read(fds[0], &c, 1);
  for (;;) pause();
}

static void* waiter(void* arg) {
  long i = (long)arg;
  pthread_barrier_wait(&g_barrier);
  if (i % 3 == 0) wait_forever_in_cond();
  if (i % 3 == 1) wait_forever_in_sleep();
  wait_forever_in_read();
  return NULL;
}

NOINLINE void crash_now(void) {
  *g_null = 1;
}

NOINLINE int overflow(int n) {
  volatile char pad[512];
  pad[0] = (char)n;
  return overflow(n + 1) + pad[0];
}
static void* overflow_thread(void* arg) {
  (void)arg;
  g_sink = overflow(0);
  return NULL;
}

static void* blocked_thread(void* arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pthread_barrier_wait(&g_barrier);
  wait_forever_in_sleep();
  return NULL;
}

/* A thread that never answers a signal: it waits for a vfork child (a
 * killable wait, which only a fatal signal ends) that waits for it to die.
 * SIGALRM blocked, so an alarm is never given to it. */
static int g_vfork_ready[2] = {-1, -1}; /* the child's byte: its parent is in vfork */
static void* unanswering_thread(void* arg) {
  (void)arg;
  sigset_t alrm;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alrm, NULL);
  pthread_barrier_wait(&g_barrier);
  if (vfork() == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (g_vfork_ready[1] >= 0) write(g_vfork_ready[1], "r", 1);
    for (;;) pause();
  }
  return NULL;
}

NOINLINE void simultaneous_crash(void) {
  *g_null = 2;
}
static void* crasher_thread(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_barrier);
  simultaneous_crash();
  return NULL;
}

static void* crasher_thread_now(void* arg) {
  (void)arg;
  usleep(20000);
  crash_now();
  return NULL;
}

static void* dump_requester(void* arg) {
  (void)arg;
  for (;;) {
    kill(getpid(), SIGUSR2);
    usleep(500);
  }
  return NULL;
}

static int hold_loader_lock(struct dl_phdr_info* info, size_t size, void* data) {
  (void)info;
  (void)size;
  (void)data;
  pthread_barrier_wait(&g_barrier);
  for (;;) pause(); /* inside dl_iterate_phdr: the loader's lock stays held */
  return 0;
}

static void* loader_lock_thread(void* arg) {
  (void)arg;
  dl_iterate_phdr(hold_loader_lock, NULL);
  return NULL;
}

static void* malloc_thread(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_barrier);
  for (;;) {
    void* p = malloc(64 + (rand() & 1023));
    free(p);
  }
  return NULL;
}

static void start_threads(int n, void* (*fn)(void*)) {
  pthread_barrier_init(&g_barrier, NULL, (unsigned)n + 1);
  for (long i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, fn, (void*)i) != 0) {
      perror("pthread_create");
      exit(3);
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 4;
  if (!strcmp(mode, "many")) {
    start_threads(n, waiter);
    pthread_barrier_wait(&g_barrier);
    usleep(20000);
    crash_now();
  } else if (!strcmp(mode, "worker-overflow")) {
    pthread_t t;
    pthread_create(&t, NULL, overflow_thread, NULL);
    pthread_join(t, NULL);
  } else if (!strcmp(mode, "blocked") || !strcmp(mode, "unanswering")) {
    start_threads(1, strcmp(mode, "blocked") ? unanswering_thread : blocked_thread);
    pthread_barrier_wait(&g_barrier);
    usleep(20000);
    crash_now();
  } else if (!strcmp(mode, "simultaneous")) {
    start_threads(n, crasher_thread);
    pthread_barrier_wait(&g_barrier);
    simultaneous_crash();
  } else if (!strcmp(mode, "malloc-busy")) {
    start_threads(1, malloc_thread);
    pthread_barrier_wait(&g_barrier);
    usleep(20000);
    crash_now();
  } else if (!strcmp(mode, "double-free")) {
    /* Through a volatile pointer: the compiler may not elide the pair. */
    void (*volatile release)(void*) = free;
    char* p = malloc(100);
    release(p);
    release(p);
  } else if (!strcmp(mode, "fd-exhaust")) {
    struct rlimit rl = {64, 64};
    setrlimit(RLIMIT_NOFILE, &rl);
    while (open("/dev/null", O_RDONLY) >= 0) {
    }
    if (errno != EMFILE) return 4;
    crash_now();
  } else if (!strcmp(mode, "fork-child")) {
    pid_t pid = fork();
    if (pid == 0) crash_now();
    int st = 0;
    waitpid(pid, &st, 0);
    printf("child %d %s %d\n", (int)pid, WIFSIGNALED(st) ? "signal" : "exit",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return 0;
  } else if (!strcmp(mode, "reuse-fds")) {
    /* A daemon-like program: closes every descriptor it did not open, then
     * opens its own files, which get the numbers faultline had. Then live
     * dumps (SIGUSR2 under FAULTLINE_DUMP=1) and, with "crash", a crash. */
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    /* First the report directory itself, twice, not close-on-exec (as
     * opendir(".") or open(".") before fchdir would): the same file as
     * faultline's spares, at their numbers. */
    const char* dir = getenv("FAULTLINE_DIR");
    int dirs[2];
    struct stat before[2];
    for (int i = 0; i < 2; ++i) {
      dirs[i] = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY);
      fstat(dirs[i], &before[i]);
    }
    /* Then two duplicates of one open file (stdout saved twice): one file
     * at two numbers, as two of faultline's spares are. */
    int outs[2] = {dup(1), dup(1)};
    int mine[8];
    for (int i = 0; i < 8; ++i) mine[i] = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    for (int i = 0; i < 3; ++i) raise(SIGUSR2);
    struct stat out;
    fstat(1, &out);
    for (int i = 0; i < 2; ++i) {
      /* Still stdout's copy, and not close-on-exec (a number faultline
       * closed and reused would be neither). */
      struct stat now;
      int flags = fcntl(outs[i], F_GETFD);
      if (fstat(outs[i], &now) != 0 || now.st_ino != out.st_ino || flags < 0 ||
          (flags & FD_CLOEXEC)) {
        printf("descriptor %d (stdout's copy) was taken from the program\n", outs[i]);
        return 7;
      }
    }
    for (int i = 0; i < 2; ++i) {
      /* Still the program's open: the same directory, and not close-on-exec
       * (a duplicate faultline made at that number would be). */
      struct stat now;
      int flags = fcntl(dirs[i], F_GETFD);
      if (fstat(dirs[i], &now) != 0 || now.st_ino != before[i].st_ino || flags < 0 ||
          (flags & FD_CLOEXEC)) {
        printf("descriptor %d (the directory) was taken from the program\n", dirs[i]);
        return 7;
      }
    }
    char c;
    for (int i = 0; i < 8; ++i) {
      if (read(mine[i], &c, 1) != 1) {
        printf("descriptor %d was taken from the program\n", mine[i]);
        return 7;
      }
    }
    printf("descriptors intact\n");
    fflush(stdout);
    if (argc > 2 && !strcmp(argv[2], "crash")) crash_now();
    return 0;
  } else if (!strcmp(mode, "small-altstack") || !strcmp(mode, "small-altstack-worker")) {
    /* Like Python's faulthandler: the main thread's signal stack is replaced
     * by a small one (8 KiB, guard pages on both sides, so an overrun faults
     * instead of silently corrupting memory). */
    char* region =
        mmap(NULL, 3 * 4096 + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(region, 4096, PROT_NONE);
    mprotect(region + 4096 + 8192, 4096, PROT_NONE);
    stack_t ss = {0};
    ss.ss_sp = region + 4096;
    ss.ss_size = 8192;
    if (sigaltstack(&ss, NULL) != 0) return 6;
    if (!strcmp(mode, "small-altstack")) crash_now();
    /* A worker crashes; the main thread answers the stack request on its
     * small signal stack. */
    pthread_t t;
    pthread_create(&t, NULL, crasher_thread_now, NULL);
    wait_forever_in_sleep();
  } else if (!strcmp(mode, "fork-while-dumping")) {
    /* Live dumps keep coming (FAULTLINE_DUMP=1) while children fork and
     * crash: each child must report its own crash and die, never hang. */
    pthread_t t;
    pthread_create(&t, NULL, dump_requester, NULL);
    for (int i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        alarm(20); /* a hang would show as SIGALRM */
        crash_now();
      }
      int st = 0;
      waitpid(pid, &st, 0);
      printf("%s %d\n", WIFSIGNALED(st) ? "signal" : "exit",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    fflush(stdout);
    return 0;
  } else if (!strcmp(mode, "abrt-during-dump")) {
    /* A supervisor's kill -ABRT arrives while the main thread is taking a
     * live dump (slow: a thread never answers). The process must still die
     * by SIGABRT. */
    char ready;
    if (pipe(g_vfork_ready) != 0) return 2;
    start_threads(1, unanswering_thread);
    pthread_barrier_wait(&g_barrier);
    /* Only once that thread is in vfork, where it cannot answer: before,
     * it could still answer and the dump end before the SIGABRT came. */
    if (read(g_vfork_ready[0], &ready, 1) != 1) return 2;
    if (fork() == 0) {
      usleep(300000);
      kill(getppid(), SIGABRT);
      _exit(0);
    }
    raise(SIGUSR2);
    printf("still alive\n");
    fflush(stdout);
    sleep(2);
    return 0;
  } else if (!strcmp(mode, "loader-lock")) {
    /* Another thread holds the dynamic loader's lock forever, which the
     * unwinder needs: the watchdog must cut the capture short and still
     * leave a report. */
    start_threads(1, loader_lock_thread);
    pthread_barrier_wait(&g_barrier);
    crash_now();
  } else if (!strcmp(mode, "exec")) {
    execv(argv[2], argv + 2);
    return 5;
  } else if (!strcmp(mode, "dump-wait")) {
    start_threads(n, waiter);
    pthread_barrier_wait(&g_barrier);
    printf("ready\n");
    fflush(stdout);
    char buf[16];
    while (read(0, buf, sizeof buf) > 0) {
    }
    return 0;
  } else {
    return 2;
  }
  return 0;
}
