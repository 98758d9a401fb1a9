// The C++ half of the frame oracle corpus: templates, lambdas, std::function,
// virtual calls, anonymous namespaces, hot/cold split functions and the
// noreturn paths of the C++ runtime. One scenario per run, chosen by argv[1].
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#define NOINLINE __attribute__((noinline))

volatile int sink;
int* volatile null_ptr = nullptr;

struct Tensor {
  int* data;
  long size;
};

namespace corpus {

template <typename T>
struct Matrix {
  T* cells;
  template <typename U>
  NOINLINE U sum(int n) const {
    U total = 0;
    for (int i = 0; i < n; ++i) total += static_cast<U>(cells[i]);
    return total;
  }
};

template <int N>
NOINLINE int unroll(Matrix<int>& m) {
  if constexpr (N == 0) {
    return static_cast<int>(m.sum<double>(4));
  } else {
    return unroll<N - 1>(m) + N;
  }
}

struct Op {
  virtual ~Op() = default;
  virtual int run(int x) = 0;
};
struct Scale : Op {
  int* factor = nullptr;
  NOINLINE int run(int x) override { return x * *factor; }
};
NOINLINE int apply_op(Op& op, int x) { return op.run(x) + 1; }

// A class whose destructor is running when a pure virtual is called.
struct Base {
  Base() = default;
  virtual ~Base() { call_it(); }
  NOINLINE void call_it() { step(); }
  virtual void step() = 0;
};
struct Derived : Base {
  void step() override { sink++; }
};

}  // namespace corpus

namespace {

NOINLINE void hidden_fault(int v) { *null_ptr = v; }
NOINLINE void hidden_caller(int v) {
  hidden_fault(v);
  sink++;
}

}  // namespace

// A function GCC splits into a hot part and a ".cold" part: the fault is in
// the unlikely branch.
NOINLINE int checked_get(const int* p, int i) {
  if (__builtin_expect(p == nullptr, 0)) {
    std::fprintf(stderr, "null table at %d\n", i);
    return *null_ptr + i;
  }
  return p[i];
}

NOINLINE void run_callback(const std::function<void(Tensor&)>& f, Tensor& t) {
  f(t);
  sink++;
}

NOINLINE void throw_it(int v) {
  if (v > 0) throw std::runtime_error("uncaught " + std::to_string(v));
}
NOINLINE void noexcept_wrapper(int v) noexcept { throw_it(v); }

int main(int argc, char** argv) {
  const char* s = argc > 1 ? argv[1] : "";
  if (!std::strcmp(s, "template")) {
    corpus::Matrix<int> m{null_ptr};
    sink = corpus::unroll<3>(m);
  } else if (!std::strcmp(s, "lambda")) {
    Tensor t{nullptr, 4};
    run_callback(
        [](Tensor& x) {
          for (long i = 0; i < x.size; ++i) x.data[i] = static_cast<int>(i);
        },
        t);
  } else if (!std::strcmp(s, "virtual")) {
    corpus::Scale sc;
    corpus::Op* volatile op = &sc;
    sink = corpus::apply_op(*op, argc);
  } else if (!std::strcmp(s, "anon")) {
    hidden_caller(argc);
  } else if (!std::strcmp(s, "cold")) {
    sink = checked_get(nullptr, argc);
  } else if (!std::strcmp(s, "terminate")) {
    throw_it(argc);
  } else if (!std::strcmp(s, "noexcept")) {
    noexcept_wrapper(argc);
  } else if (!std::strcmp(s, "pure-virtual")) {
    corpus::Derived d;
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
  }
  return 0;
}
