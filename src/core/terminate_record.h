// Uncaught exceptions.
//
// C++: a std::terminate handler (src/install/terminate.h,
// installed in normal context) records the exception's type (mangled; the offline side
// demangles) and what() in static memory, then hands over to the previous
// terminate handler, whose abort() produces a report of kind "terminate".
#pragma once

namespace faultline::core {

struct TerminateInfo {
  volatile int set;    // 1 once the terminate handler recorded something
  int tid;             // the thread that called std::terminate
  int has_exception;   // 0: terminate without an active exception
  char type[256];      // mangled type name ("St13runtime_error", "i")
  char message[2048];  // what(), for std::exception and derived types
  int message_truncated;
};

extern TerminateInfo g_terminate;

// Python: the package's sys.excepthook and threading.excepthook hand the
// exception to faultline_exception_report() (src/install/api.cpp, normal
// context), which records it here and takes a live dump of kind "exception"
// on the same thread. Text only: the type's qualified name, str() of the
// exception, its traceback's frames innermost last, one per line as
// "file\tline\tfunction\n" (the package replaces tabs and newlines in
// names), and the text Python prints for it.
struct PythonExceptionInfo {
  volatile int set;  // 1 while the report is being taken
  int tid;           // the thread that reports it
  char type[256];
  char message[4096];
  char frames[16384];
  char text[16384];
  int message_truncated, frames_truncated, text_truncated;
};

extern PythonExceptionInfo g_py_exception;

// One frame of PythonExceptionInfo::frames, its fields cut to fit.
struct ExceptionFrame {
  char file[1024];
  char function[256];
  long line;
};

// Reads the frame at *p into *f and moves *p past it; false at the end.
//   for (const char* p = info.frames; next_exception_frame(&p, &f);) ...
inline bool next_exception_frame(const char** p, ExceptionFrame* f) {
  const char* s = *p;
  if (!s || !*s) return false;
  auto field = [&s](char* out, size_t size, char stop) {
    size_t n = 0;
    for (; *s && *s != stop && *s != '\n'; ++s) {
      if (n + 1 < size) out[n++] = *s;
    }
    out[n] = '\0';
    if (*s == stop) ++s;
  };
  char line[24];
  field(f->file, sizeof f->file, '\t');
  field(line, sizeof line, '\t');
  field(f->function, sizeof f->function, '\n');
  f->line = 0;
  for (const char* d = line; *d >= '0' && *d <= '9'; ++d) f->line = f->line * 10 + (*d - '0');
  if (*s == '\n') ++s;
  *p = s;
  return true;
}

}  // namespace faultline::core
