// What a JsonWriter writes, for the unit tests: fn(writer) runs into a pipe
// through a sink buffer of bufsize bytes, and the bytes that came out are
// returned.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <string>

#include "core/write/json_writer.h"

template <typename Fn>
std::string render_json(Fn fn, size_t bufsize = 64) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::string buf(bufsize, '\0');
  faultline::core::FdSink sink(fds[1], buf.data(), buf.size());
  faultline::core::JsonWriter w(&sink);
  fn(w);
  sink.flush();
  close(fds[1]);
  std::string out;
  char tmp[4096];
  ssize_t n;
  while ((n = read(fds[0], tmp, sizeof tmp)) > 0) out.append(tmp, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}
