/* An embedding program whose Python calls back into C that calls Python
 * again, on two threads: main -> run_script -> PyRun_SimpleString ->
 * outer -> emb.call (PyObject_Call) -> middle -> emb.call -> inner ->
 * emb.crash, which faults; a thread created in C (c_thread) calls Python
 * (PyObject_Call) -> waiter -> emb.call -> blocked -> emb.block, which waits
 * in C without the GIL. argv[1] is the script. Built per interpreter by the
 * tests, against that interpreter's headers and library. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <unistd.h>

static volatile int blocked_now;

__attribute__((noinline)) static PyObject* emb_call(PyObject* self, PyObject* fn) {
  (void)self;
  PyObject* args = PyTuple_New(0);
  PyObject* r = PyObject_Call(fn, args, NULL);
  Py_DECREF(args);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return r;
}

__attribute__((noinline)) static PyObject* emb_crash(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  *(volatile int*)0 = 42;
  Py_RETURN_NONE;
}

__attribute__((noinline)) static PyObject* emb_block(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  Py_BEGIN_ALLOW_THREADS
  blocked_now = 1;
  for (;;) pause();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyObject* emb_wait_blocked(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  Py_BEGIN_ALLOW_THREADS
  while (!blocked_now) usleep(1000);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

__attribute__((noinline, noclone)) static void* c_thread(void* fn) {
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* r = PyObject_CallObject((PyObject*)fn, NULL);
  Py_XDECREF(r);
  PyGILState_Release(g);
  __asm__ volatile("" ::: "memory");
  return NULL;
}

static PyObject* emb_start_thread(PyObject* self, PyObject* fn) {
  (void)self;
  pthread_t t;
  Py_INCREF(fn);
  if (pthread_create(&t, NULL, c_thread, fn) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  Py_RETURN_NONE;
}

static PyMethodDef emb_methods[] = {
    {"call", emb_call, METH_O, NULL},
    {"crash", emb_crash, METH_NOARGS, NULL},
    {"block", emb_block, METH_NOARGS, NULL},
    {"wait_blocked", emb_wait_blocked, METH_NOARGS, NULL},
    {"start_thread", emb_start_thread, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef emb_module = {PyModuleDef_HEAD_INIT, "emb", NULL, -1, emb_methods};

static PyObject* init_emb(void) { return PyModule_Create(&emb_module); }

__attribute__((noinline, noclone)) static int run_script(const char* code) {
  int r = PyRun_SimpleString(code);
  __asm__ volatile("" ::: "memory");
  return r;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: embed_nested SCRIPT\n");
    return 2;
  }
  FILE* f = fopen(argv[1], "r");
  if (!f) return 3;
  static char code[65536];
  size_t n = fread(code, 1, sizeof code - 1, f);
  fclose(f);
  code[n] = 0;
  PyImport_AppendInittab("emb", init_emb);
  Py_Initialize();
  int r = run_script(code);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return r;
}
