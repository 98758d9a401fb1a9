// A C++ program whose crash has a deep stack: 200 frames of template
// recursion plus the crash itself.
#include <cstdio>
#include <cstdlib>

namespace deep {
volatile int* volatile target = nullptr;

template <int N>
struct Level {
  __attribute__((noinline)) static int run(int x) {
    int r = Level<N - 1>::run(x + 1);
    return r + x;  // not a tail call
  }
};
template <>
struct Level<0> {
  __attribute__((noinline)) static int run(int x) {
    *target = x;
    return x;
  }
};
}  // namespace deep

int main(int argc, char**) { return deep::Level<200>::run(argc) == 7 ? 0 : 1; }
