// Uncaught C++ exceptions. A std::terminate handler (src/install/terminate.h,
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

}  // namespace faultline::core
