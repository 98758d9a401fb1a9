// Raw, signal-safe logging to a file descriptor (stderr by default). The crash
// path's only way to print: write(2) of pieces, no formatting library.
#pragma once

#include <stdint.h>

namespace faultline::core {

// Install time: remembers what stderr is (and keeps a duplicate of it).
void stderr_remember();
// The descriptor that is still the stderr of install time: 2, else the
// duplicate, else -1. Writes to fd 2 through raw_write* go there.
int stderr_fd();
void raw_write(int fd, const char* s);
void raw_write_n(int fd, const char* s, unsigned long n);
void raw_write_dec(int fd, int64_t v);
void raw_write_hex(int fd, uint64_t v);
// Writes each non-null piece in order, to the text descriptor.
void raw_log(const char* a, const char* b = nullptr, const char* c = nullptr,
             const char* d = nullptr);

// Where faultline's text goes (the faulthandler-style summary, notices, a
// report that could not be written): stderr unless faultline_set_text_fd().
int raw_log_fd();
void raw_log_set_fd(int fd);

}  // namespace faultline::core
