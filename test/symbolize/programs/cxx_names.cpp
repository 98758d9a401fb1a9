// A test program for the spelling of C++ names (test_cxx_names.py): lambdas
// (plain, generic, in templates, in namespaces, through std::function),
// inlined member functions, templates and anonymous namespaces, built by the
// test with GCC and Clang at -O2 -g. With a scenario name it crashes there,
// inside inlined code; without one it runs every path and exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

struct Tensor {
  int* data;
  int n;
  int sum() const {
    int s = 0;
    for (int i = 0; i < n; ++i) s += data[i];
    return s;
  }
};

volatile int sink;
const char* scenario = "";

static bool is(const char* name) { return std::strcmp(scenario, name) == 0; }

static void poison(std::vector<Tensor>& ts, const char* name) {
  if (is(name)) ts.push_back({nullptr, 1 << 20});
}

namespace ml {
namespace {

// A template in an anonymous namespace, called with lambdas: they are
// inlined into its instantiations.
template <typename F>
__attribute__((noinline)) int apply_all(std::vector<Tensor>& ts, F f) {
  int s = 0;
  for (auto& t : ts) s += f(t);
  return s;
}

class Accumulator {
 public:
  // Inlined into its caller.
  void add(const Tensor& t) { total_ += t.data[t.n - 1] + t.sum(); }
  int total() const { return total_; }

 private:
  int total_ = 0;
};

__attribute__((noinline)) int accumulate(std::vector<Tensor>& ts) {
  Accumulator acc;
  for (auto& t : ts) acc.add(t);
  return acc.total();
}

}  // namespace

template <typename T>
struct Model {
  T scale;
  // A generic lambda and a plain one inside a member of a class template.
  int run(std::vector<Tensor>& ts) {
    auto generic = [this](auto& t) { return static_cast<int>(t.data[t.n - 1] * scale); };
    auto plain = [](Tensor& t) { return t.data[0] + t.n; };
    return apply_all(ts, generic) + apply_all(ts, plain);
  }
};

// The lambda is inlined into the loop, and its call operator also has an
// out-of-line copy (its address is taken): both must be spelt alike.
__attribute__((noinline)) int crash_in_lambda(std::vector<Tensor>& ts) {
  auto poke = [](Tensor& t) {
    t.data[t.n - 1] += 1;
    return t.n;
  };
  static int (decltype(poke)::*volatile call)(Tensor&) const = &decltype(poke)::operator();
  int s = (poke.*call)(ts[0]);
  for (auto& t : ts) s += poke(t);
  return s;
}

}  // namespace ml

int main(int argc, char** argv) {
  if (argc > 1) scenario = argv[1];
  std::vector<Tensor> ts;
  static int buf[4] = {1, 2, 3, 4};
  ts.push_back({buf, 4});
  poison(ts, "member");
  sink = ml::accumulate(ts);
  poison(ts, "generic");
  ml::Model<double> md{2.0};
  sink = md.run(ts);
  ml::Model<int> mi{3};
  sink = mi.run(ts);
  poison(ts, "function");
  std::function<int(Tensor&)> fn = [](Tensor& t) { return t.data[t.n - 1]; };
  for (auto& t : ts) sink = fn(t);
  poison(ts, "lambda");
  sink = ml::crash_in_lambda(ts);
  return 0;
}
