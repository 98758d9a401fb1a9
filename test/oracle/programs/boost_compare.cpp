// Boost.Stacktrace and faultline::dump_now() at the same point of a C++
// program: test_boost.py compares the calling thread's frames. Prints the
// thread id, then one line per Boost frame: address and name.
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/stacktrace.hpp>
#include <cstdio>
#include <faultline/faultline.hpp>
#include <functional>

#define NOINLINE __attribute__((noinline))

volatile int sink;

namespace probe {

template <typename T>
struct Layer {
  NOINLINE static void capture(T depth) {
    boost::stacktrace::stacktrace st;
    int rc = faultline::dump_now();
    std::printf("dump %d\ntid %ld\n", rc, static_cast<long>(syscall(SYS_gettid)));
    for (const auto& f : st) std::printf("%p %s\n", f.address(), f.name().c_str());
    sink += static_cast<int>(depth);
  }
};

namespace {
NOINLINE void hidden(int d) {
  Layer<int>::capture(d);
  sink++;
}
}  // namespace

NOINLINE void through_function(const std::function<void(int)>& f, int d) {
  f(d);
  sink++;
}

}  // namespace probe

int main() {
  faultline::install();
  probe::through_function([](int d) { probe::hidden(d); }, 3);
  return 0;
}
