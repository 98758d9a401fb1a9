/* A CPython 3.11 extension that corrupts the interpreter's frame state the
 * way a memory bug would, then crashes. Built by test_corrupted.py against
 * Debian's python3.11 headers (Py_BUILD_CORE for _PyInterpreterFrame).
 *   corrupt.frame_chain(): the caller frame's `previous` -> unmapped address
 *   corrupt.code_pointer(): the caller frame's f_code -> unmapped address
 *   corrupt.code_type(): the caller frame's f_code -> a list object */
#define PY_SSIZE_T_CLEAN
#define Py_BUILD_CORE 1
#include <Python.h>

#include "internal/pycore_frame.h"

static _PyInterpreterFrame* caller(void) {
  return PyThreadState_Get()->cframe->current_frame;
}

static void crash(void) {
  *(volatile int*)0 = 1;
}

static PyObject* frame_chain(PyObject* self, PyObject* args) {
  caller()->previous = (_PyInterpreterFrame*)0xdead0000;
  crash();
  Py_RETURN_NONE;
}

static PyObject* code_pointer(PyObject* self, PyObject* args) {
  caller()->f_code = (PyCodeObject*)0x10;
  crash();
  Py_RETURN_NONE;
}

static PyObject* code_type(PyObject* self, PyObject* args) {
  caller()->f_code = (PyCodeObject*)PyList_New(0);
  crash();
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"frame_chain", frame_chain, METH_NOARGS, NULL},
    {"code_pointer", code_pointer, METH_NOARGS, NULL},
    {"code_type", code_type, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "corrupt", NULL, -1, methods};

PyMODINIT_FUNC PyInit_corrupt(void) {
  return PyModule_Create(&module);
}
