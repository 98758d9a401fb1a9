// The C++ library latecxx loads late: it throws through a C caller, so
// std::terminate runs.
#include <stdexcept>

extern "C" __attribute__((noinline)) void throw_late() {
  throw std::runtime_error("thrown by a library loaded late");
}
