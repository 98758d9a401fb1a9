// A C++ program that embeds Python and links faultline: Python code calls
// back into C++ (the "native" module below), and the C++ side crashes. The
// report shows the C++ frames, the interpreter's, and the Python frames in
// one stack.
//
//   embed [SCRIPT.py]     (default: a built-in script)
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdio>
#include <faultline/faultline.hpp>

namespace {

struct Tensor {
  float* data;
  long size;
};

// The bug: a tensor whose data pointer was never set.
__attribute__((noinline)) float tensor_sum(const Tensor& t) {
  float s = 0;
  for (long i = 0; i < t.size; ++i) s += t.data[i];
  return s;
}

PyObject* native_sum(PyObject*, PyObject* args) {
  long n = 0;
  if (!PyArg_ParseTuple(args, "l", &n)) return nullptr;
  Tensor t{nullptr, n};
  return PyFloat_FromDouble(tensor_sum(t));
}

PyMethodDef kMethods[] = {
    {"tensor_sum", native_sum, METH_VARARGS, "Sums a tensor of n floats (crashes)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "native", nullptr, -1, kMethods, nullptr, nullptr, nullptr, nullptr};

PyObject* init_native() {
  return PyModule_Create(&kModule);
}

const char* kScript = R"(
import native

def forward(batch):
    return native.tensor_sum(batch)

def serve(requests):
    for r in requests:
        forward(r)

serve([16])
)";

}  // namespace

int main(int argc, char** argv) {
  faultline::install();
  faultline::annotate("embedder", "examples/embed");
  PyImport_AppendInittab("native", init_native);
  Py_Initialize();
  int rc;
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "r");
    if (!f) {
      std::perror(argv[1]);
      return 2;
    }
    rc = PyRun_SimpleFile(f, argv[1]);
    std::fclose(f);
  } else {
    rc = PyRun_SimpleString(kScript);
  }
  Py_Finalize();
  return rc == 0 ? 0 : 1;
}
