// Tail calls in C++ for the tail-call frame oracle (test_tailcalls.py): at
// -O2 each `return f(x);` below is a jump, and the function making it leaves
// no frame on the stack; gdb rebuilds such frames from DWARF call-site records.
#include <cstring>

#define NOINLINE __attribute__((noinline))

volatile int sink;
int* volatile null_ptr;

namespace shapes {

struct Tensor {
  int rank;
};

// chain: Model::forward -> layer<int> -> kernel, each a tail call.
NOINLINE int kernel(Tensor& t) {
  *null_ptr = t.rank;
  return sink;
}
template <typename T>
NOINLINE int layer(Tensor& t, T scale) {
  sink = static_cast<int>(scale);
  return kernel(t);
}
struct Model {
  NOINLINE int forward(Tensor& t);
};
int Model::forward(Tensor& t) {
  sink = t.rank;
  return layer<int>(t, 3);
}

// ambiguous: route tail-calls fast or slow, both tail-call sink_into.
NOINLINE int sink_into(Tensor& t) {
  *null_ptr = t.rank + 1;
  return sink;
}
NOINLINE int fast(Tensor& t) {
  sink = 1;
  return sink_into(t);
}
NOINLINE int slow(Tensor& t) {
  sink = 2;
  return sink_into(t);
}
NOINLINE int route(Tensor& t) {
  sink = t.rank;
  if (t.rank & 1) return fast(t);
  return slow(t);
}

}  // namespace shapes

int main(int argc, char** argv) {
  const char* s = argc > 1 ? argv[1] : "";
  shapes::Tensor t{argc};
  shapes::Model m;
  int r = 0;
  if (!std::strcmp(s, "chain")) r = m.forward(t);
  else if (!std::strcmp(s, "ambiguous")) r = shapes::route(t);
  return r + sink;
}
