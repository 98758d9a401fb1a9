/*
 * faultline: a crash reporter for Linux processes.
 *
 * Preloaded (LD_PRELOAD=libfaultline.so) the library installs itself from a
 * constructor, configured by FAULTLINE_* environment variables. Linked into a
 * program, call faultline_install() early in main():
 *
 *   faultline_options opts;
 *   faultline_options_init(&opts);          // defaults, then FAULTLINE_* env
 *   opts.report_dir = "/var/crash/myserver";
 *   if (faultline_install(&opts) != 0) { ... the program still runs ... }
 *
 * On SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT or SIGTRAP a JSON report
 * (schema "faultline/1") is written to the report directory, a short summary
 * goes to stderr, and the signal is handed on so the process dies as it would
 * have without faultline (same exit status, same core dump).
 *
 * Every function here is for normal program context, not for signal handlers,
 * unless its comment says otherwise.
 */
#ifndef FAULTLINE_FAULTLINE_H_
#define FAULTLINE_FAULTLINE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAULTLINE_API __attribute__((visibility("default")))

/* Limits, in bytes without the terminating NUL. A longer crash key is refused
 * (-EINVAL); a longer value, breadcrumb or callback text is cut. The C++ API,
 * the Python package and the documentation use these same numbers. */
#define FAULTLINE_KEY_MAX 63                /* a crash key, a callback key */
#define FAULTLINE_VALUE_MAX 511             /* a process-wide crash key's value */
#define FAULTLINE_ANNOTATIONS_MAX 64        /* process-wide crash keys set at once */
#define FAULTLINE_THREAD_VALUE_MAX 255      /* a thread-scoped crash key's value */
#define FAULTLINE_THREAD_ANNOTATIONS_MAX 8  /* thread-scoped crash keys per thread */
#define FAULTLINE_ANNOTATED_THREADS_MAX 256 /* live threads with thread-scoped keys */
#define FAULTLINE_BREADCRUMB_MAX 255        /* one breadcrumb */
#define FAULTLINE_BREADCRUMBS_MAX 64        /* breadcrumbs kept (the last ones) */
#define FAULTLINE_CALLBACK_VALUE_MAX 1023   /* a callback value */
#define FAULTLINE_CALLBACK_PAIRS_MAX 32     /* pairs one crash's callback may add */

/* A user callback runs inside the crash handler (so it must be
 * async-signal-safe: no malloc, no locks, no stdio) and may add key/value
 * pairs to the report's "callback" object with faultline_callback_add(). */
typedef struct faultline_callback_writer faultline_callback_writer;
typedef void (*faultline_crash_callback)(faultline_callback_writer* writer, void* user_data);

/* Async-signal-safe; for use inside the callback only. Up to
 * FAULTLINE_CALLBACK_PAIRS_MAX pairs; keys up to FAULTLINE_KEY_MAX bytes,
 * values up to FAULTLINE_CALLBACK_VALUE_MAX (longer ones are cut). */
FAULTLINE_API void faultline_callback_add(faultline_callback_writer* writer, const char* key,
                                          const char* value);

/* Options of faultline_install(). Initialise with faultline_options_init().
 *
 * The struct grows at its end only. `size` says how much of it the caller
 * knows: a program built against an older faultline.h passes its smaller size
 * and the library gives every field past it its default (what
 * faultline_options_init() would set), so it keeps working with a newer
 * library. FAULTLINE_OPTIONS_SIZE_V1, _V2, ... are the sizes of the layouts
 * published so far; other sizes are refused. */
typedef struct faultline_options {
  /* sizeof(faultline_options) as the caller was compiled; set by
   * faultline_options_init(). */
  size_t size;
  /* Directory for reports; NULL or "" means the current directory. The
   * directory is opened once at install; reports are created relative to it. */
  const char* report_dir;
  /* Bit (1u << signo) for each fatal signal to handle. */
  unsigned long long signals;
  /* 1: print a faulthandler-style summary to stderr before the report. */
  int write_stderr;
  /* Most native frames kept per thread (deeper stacks are counted and cut). */
  int max_frames;
  /* Seconds the handler may run before the watchdog ends the process with
   * the original signal. 0 disables the watchdog. */
  int watchdog_seconds;
  /* Size of the crash arena in bytes (mmapped at install). */
  size_t arena_bytes;
  /* Threads whose native stacks are captured (the rest are listed only). */
  int max_threads;
  /* Real-time signal used to ask each thread for its stack at crash time. */
  int thread_signal;
  /* Milliseconds to wait for all threads to answer. */
  int thread_timeout_ms;
  /* Live-dump signal (e.g. SIGUSR2): a report of all threads, and the process
   * goes on. 0: no dump signal. */
  int dump_signal;
  /* Seconds after install to take a live dump (faulthandler's
   * dump_traceback_later), as faultline_dump_after() does; 0: leaves the
   * timed dump as it is. */
  int dump_after_seconds;
  /* 1: end the process (exit status 1) after the timed dump. */
  int exit_after_dump;
  /* 1: give every new thread its own alternate signal stack, so a stack
   * overflow on any thread is reported (interposes pthread_create). */
  int thread_altstacks;
  /* 1 (the default): keep faultline's handlers in front when the program
   * installs its own for the same signals later (sigaction() is interposed;
   * the program's queries still see its own handler). At a hardware fault
   * theirs runs first and its outcome decides (recovered: no report); at
   * other signals after faultline's report (doc/security.md). 0: step aside
   * for them (FAULTLINE_STAY_IN_FRONT=0). */
  int stay_in_front;
  /* Called in the crash handler after capture, before the report is written. */
  faultline_crash_callback callback;
  void* callback_data;
  /* ---- end of layout 1 (FAULTLINE_OPTIONS_SIZE_V1) */
  /* 1: write a minidump (Breakpad's format: lldb, minidump_stackwalk and
   * Sentry read it) beside each crash report, under the same name with .dmp;
   * the report names it in its "minidump" field. Live dumps have none.
   * Default 0 (FAULTLINE_MINIDUMP). */
  int minidump;
  /* ---- end of layout 2 (FAULTLINE_OPTIONS_SIZE_V2; its last 4 bytes are
   * padding, so the next field starts at 104, never inside it) */
} faultline_options;

#define FAULTLINE_OPTIONS_SIZE_V1 96  /* size .. callback_data */
#define FAULTLINE_OPTIONS_SIZE_V2 104 /* .. minidump */

/* Fills the first `size` bytes of *opts with the defaults, then applies the
 * FAULTLINE_* environment variables (a bad value is reported on stderr and
 * the default kept), and sets opts->size. Returns 0, or -EINVAL (with a
 * message on stderr, *opts untouched) for a size that is no layout's. Call it
 * as faultline_options_init(&opts), which passes sizeof(opts). */
FAULTLINE_API int faultline_options_init_sized(faultline_options* opts, size_t size);
#define faultline_options_init(opts) faultline_options_init_sized((opts), sizeof *(opts))

/* Installs the handlers. Returns 0, or a negative errno value (the program is
 * never stopped: a failed install leaves the previous handlers in place):
 * -EINVAL when opts->size is no layout's size (opts not initialised with
 * faultline_options_init()), -E2BIG when the caller's struct is larger than
 * this library's and sets a field it does not know (a message on stderr says
 * which). opts NULL: the defaults. Installing again replaces the options,
 * except arena_bytes: the crash arena of the first install stays (a crash or
 * a live dump on another thread may be using it). */
FAULTLINE_API int faultline_install(const faultline_options* opts);

/* Restores the handlers that were in place before faultline_install(). */
FAULTLINE_API void faultline_uninstall(void);

/* 1 when faultline's handlers are installed. */
FAULTLINE_API int faultline_installed(void);

/* Crash keys. Process-wide: the report's "annotations". value NULL removes
 * the key. Keys up to FAULTLINE_KEY_MAX bytes, values up to
 * FAULTLINE_VALUE_MAX (longer ones are cut). Lock-free, never allocates; safe
 * from any thread and from signal handlers. Returns 0, -EINVAL (bad key),
 * -ENOSPC (FAULTLINE_ANNOTATIONS_MAX keys already set). */
FAULTLINE_API int faultline_annotate(const char* key, const char* value);

/* Thread-scoped crash key (up to FAULTLINE_THREAD_ANNOTATIONS_MAX per thread,
 * values up to FAULTLINE_THREAD_VALUE_MAX bytes): shown in the crashing
 * thread's "annotations", e.g. the request a worker serves. Up to
 * FAULTLINE_ANNOTATED_THREADS_MAX live threads can have set keys (-ENOSPC
 * beyond); a thread that has exited frees its place. */
FAULTLINE_API int faultline_thread_annotate(const char* key, const char* value);

/* Appends a breadcrumb (up to FAULTLINE_BREADCRUMB_MAX bytes) to a ring of
 * the last FAULTLINE_BREADCRUMBS_MAX; the report lists them oldest first with
 * their times. */
FAULTLINE_API void faultline_breadcrumb(const char* message);

/* Writes a report of kind "dump" of the live process (every thread) and
 * returns 0, or a negative errno value. The process goes on. Captured by
 * ptrace from a helper (the `faultline` command) where it can be, so no
 * other thread's system call is interrupted; else by signal, and the report
 * says why (doc/cli.md). Normal program context, not a signal handler. */
FAULTLINE_API int faultline_dump_now(void);

/* Arms a timed live dump: `milliseconds` from now (0: -EINVAL) a watchdog
 * thread of the library takes the dump faultline_dump_now() takes, and with
 * exit_after != 0 then ends the process with _exit(1) (faulthandler's
 * dump_traceback_later(exit=True)). No timer signal: no thread of the
 * program is interrupted. Calling it again replaces the deadline; the
 * watchdog (named "faultline-later", every signal blocked) is started by
 * the first call and stays. A fork child inherits no armed dump. Returns 0,
 * -ENOTCONN (not installed), or a negative errno value. Normal program
 * context (FAULTLINE_DUMP_AFTER uses it). */
FAULTLINE_API int faultline_dump_after(unsigned int milliseconds, int exit_after);

/* faultline_dump_after(), and with exit_after the process ends only once
 * thread wait_tid (a thread id of this process, 0: none) has ended too, at
 * most 10 s after the report: the Python package names faulthandler's
 * watchdog thread, so that its text comes before the exit. */
FAULTLINE_API int faultline_dump_after_thread(unsigned int milliseconds, int exit_after,
                                              int wait_tid);

/* Disarms the timed dump. One being written is waited for (with exit_after
 * the process then ends). faultline_uninstall() cancels it too. */
FAULTLINE_API void faultline_cancel_dump_after(void);

/* Writes a report of kind "exception" of the live process, as
 * faultline_dump_now() does, with an "exception" object: type, message,
 * the traceback's frames (innermost last, one per line as
 * "file<TAB>line<TAB>function"), and text (as the language prints it).
 * Any may be NULL; each is cut at the report's limit. The Python package
 * calls it from sys.excepthook and threading.excepthook. Returns 0, or a
 * negative errno value (-EBUSY while another thread's is being written). */
FAULTLINE_API int faultline_exception_report(const char* type, const char* message,
                                             const char* frames, const char* text);

/* Where faultline's text goes (the faulthandler-style summary on a crash or
 * dump, "report written to ...", a report that could not be written): file
 * descriptor fd instead of stderr (2). Returns 0, or -EBADF. Like
 * faulthandler's file, the descriptor must stay open. Async-signal-safe. */
FAULTLINE_API int faultline_set_text_fd(int fd);

/* Copies the path of the last report this process wrote into buf (always
 * terminated); returns its length, or 0 if none was written. */
FAULTLINE_API size_t faultline_last_report(char* buf, size_t size);

/* The library's version, "MAJOR.MINOR.PATCH". */
FAULTLINE_API const char* faultline_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FAULTLINE_FAULTLINE_H_ */
