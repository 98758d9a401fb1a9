/* A job run under the preload with FAULTLINE_DUMP=1 whose main thread
 * writes 1 MiB to a pipe in one write() while its reader holds off: the
 * write blocks with 64 KiB moved, as a write to a slow consumer does. A
 * signal handled on the main thread would end that write with a short
 * count (a write that moved bytes is not restarted).
 *   "reader" waits in read() on stdin for a line, then drains the pipe;
 *   "joiner" waits in futex (pthread_join of the reader).
 * Prints "ready" before the write, "wrote N" after it, "read N" at the end. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE (1 << 20)

static int g_pipe[2];
static pthread_t g_reader;

static void* reader(void* arg) {
  (void)arg;
  char line[64];
  if (read(0, line, sizeof line) <= 0) exit(3);
  static char buf[65536];
  long total = 0;
  ssize_t n;
  while ((n = read(g_pipe[0], buf, sizeof buf)) > 0) total += n;
  printf("read %ld\n", total);
  return NULL;
}

static void* joiner(void* arg) {
  (void)arg;
  pthread_join(g_reader, NULL);
  return NULL;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (pipe(g_pipe) != 0) return 2;
  pthread_t t;
  pthread_create(&g_reader, NULL, reader, NULL);
  pthread_setname_np(g_reader, "reader");
  pthread_create(&t, NULL, joiner, NULL);
  pthread_setname_np(t, "joiner");
  char* data = malloc(SIZE);
  if (!data) return 2;
  memset(data, 'x', SIZE);
  printf("ready\n");
  ssize_t n = write(g_pipe[1], data, SIZE);
  printf("wrote %zd\n", n);
  close(g_pipe[1]);
  pthread_join(t, NULL);
  return 0;
}
