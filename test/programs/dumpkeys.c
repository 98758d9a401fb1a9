/* A job that records crash keys, thread keys and breadcrumbs, for live dumps
 * of it to carry (test/hostile/test_dump_keys.py):
 *   dumpkeys   (linked to faultline, installed through the C API with the
 *               dump signal SIGUSR2, which only the main thread takes)
 * Two threads, "keys-a" and "keys-b", set thread keys of their own and wait;
 * main sets its own too. Prints "ready MAIN A B" (the thread ids), then
 * reads commands, one a line:
 *   dump     -> "dump RC PATH" (faultline_dump_now()'s result, the report)
 *   corrupt  -> "corrupted" (faultline_remote_tables, the descriptor a
 *               ptrace dump reads, now says version 99)
 *   scribble -> "scribbled" (the tables it points to hold garbage: the
 *               first key and value fill their buffers with no NUL, the
 *               slots in use say 2^30, the breadcrumb count 2^64-1)
 *   badptr   -> "badptr" (the descriptor points the thread tables at an
 *               unmapped address)
 *   quit     -> exit 0 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <faultline/faultline.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_barrier_t g_ready;
static int g_pipe[2];
static pid_t g_tids[2];

struct Worker {
  int index;
  const char* request;
};

static void* worker(void* arg) {
  struct Worker* w = arg;
  g_tids[w->index] = (pid_t)syscall(SYS_gettid);
  faultline_thread_annotate("request", w->request);
  faultline_thread_annotate("worker", w->index ? "b" : "a");
  pthread_barrier_wait(&g_ready);
  struct pollfd p = {g_pipe[0], POLLIN, 0};
  for (;;) poll(&p, 1, -1);
  return NULL;
}

/* The descriptor's layout (core/capture/annotation_tables.h). */
struct Tables {
  uint64_t magic;
  uint32_t version, size;
  uint32_t sizes[3], bytes[4];
  int32_t counts[4];
  char* annotations;
  int* annotations_limit;
  void* thread_tables;
  int* probe_limit;
  void* crumbs;
  uint64_t* crumb_next;
};

static struct Tables* writable_tables(void) {
  struct Tables* d = dlsym(RTLD_DEFAULT, "faultline_remote_tables");
  if (!d || d->size != sizeof *d) return NULL;
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)d & ~(uintptr_t)(page - 1);
  if (mprotect((void*)start, (size_t)(2 * page), PROT_READ | PROT_WRITE) != 0) return NULL;
  return d;
}

static const char* command(const char* line) {
  struct Tables* d = writable_tables();
  if (!d) return "no descriptor";
  if (strncmp(line, "corrupt", 7) == 0) {
    d->version = 99;
    return "corrupted";
  }
  if (strncmp(line, "scribble", 8) == 0) {
    /* Slot 0 (the first key set): seq and used stay, key[64], value[512]. */
    memset(d->annotations + 8, 'K', 64);
    memset(d->annotations + 8 + 64, 'V', 512);
    *d->annotations_limit = 1 << 30;
    *d->crumb_next = UINT64_MAX;
    return "scribbled";
  }
  d->thread_tables = (void*)16;
  return "badptr";
}

int main(void) {
  faultline_options o;
  faultline_options_init(&o);
  o.write_stderr = 0;
  o.dump_signal = SIGUSR2;
  if (faultline_install(&o) != 0) return 7;
  faultline_annotate("job", "train-42");
  faultline_annotate("stage", "epoch 3\ttab \"quoted\" \xc3\xa9t\xc3\xa9");
  faultline_annotate("removed", "soon gone");
  faultline_annotate("removed", NULL);
  faultline_annotate("bad-utf8", "caf\xe9!");
  faultline_breadcrumb("loaded config");
  faultline_breadcrumb("step 1");
  faultline_breadcrumb("step 2 \xe2\x9c\x93");
  faultline_thread_annotate("role", "main");
  if (pipe(g_pipe) != 0) return 7;
  /* The workers never take the dump signal: a signal dump runs on main. */
  sigset_t usr2, old;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, &old);
  pthread_barrier_init(&g_ready, NULL, 3);
  static struct Worker w[2] = {{0, "GET /a?id=1"}, {1, "POST /b"}};
  const char* names[2] = {"keys-a", "keys-b"};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) {
    pthread_create(&t[i], NULL, worker, &w[i]);
    pthread_setname_np(t[i], names[i]);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_barrier_wait(&g_ready);
  printf("ready %d %d %d\n", (int)getpid(), (int)g_tids[0], (int)g_tids[1]);
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "dump", 4) == 0) {
      int rc = faultline_dump_now();
      char path[4096] = "";
      faultline_last_report(path, sizeof path);
      printf("dump %d %s\n", rc, path);
    } else if (strncmp(line, "corrupt", 7) == 0 || strncmp(line, "scribble", 8) == 0 ||
               strncmp(line, "badptr", 6) == 0) {
      printf("%s\n", command(line));
    } else if (strncmp(line, "quit", 4) == 0) {
      return 0;
    }
    fflush(stdout);
  }
  return 0;
}
