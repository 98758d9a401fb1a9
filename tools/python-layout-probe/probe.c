/* Prints offsetof() of every interpreter field the faultline walker reads,
 * compiled against one interpreter's internal headers (Py_BUILD_CORE).
 * Output: one "name value" line per field; -1 where the version has no such
 * field. tools/python-layout-probe/run-probe builds it per interpreter and
 * test/python/test_layouts.py compares the output with the walker's tables
 * (src/core/python/layouts.cpp). */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>

#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_runtime.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#include "internal/pycore_interp.h"
#elif PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_runtime.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#else
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "frameobject.h"
#endif

#define P(name, value) printf("%s %ld\n", name, (long)(value))
#define NONE(name) printf("%s -1\n", name)

int main(void) {
  printf("version %d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
  P("rt.interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX < 0x030C0000
  P("rt.gilstate_tstate_current", offsetof(_PyRuntimeState, gilstate.tstate_current));
  P("rt.gil_locked", offsetof(_PyRuntimeState, ceval.gil.locked));
  P("rt.gil_last_holder", offsetof(_PyRuntimeState, ceval.gil.last_holder));
  NONE("is.ceval_gil");
  NONE("gil.locked");
  NONE("gil.last_holder");
#else
  NONE("rt.gilstate_tstate_current");
  NONE("rt.gil_locked");
  NONE("rt.gil_last_holder");
  P("is.ceval_gil", offsetof(PyInterpreterState, ceval.gil));
  P("gil.locked", offsetof(struct _gil_runtime_state, locked));
  P("gil.last_holder", offsetof(struct _gil_runtime_state, last_holder));
#endif
  P("is.next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
  P("is.tstate_head", offsetof(PyInterpreterState, threads.head));
#else
  P("is.tstate_head", offsetof(PyInterpreterState, tstate_head));
#endif
  P("ts.next", offsetof(PyThreadState, next));
  P("ts.interp", offsetof(PyThreadState, interp));
  P("ts.thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
  P("ts.native_thread_id", offsetof(PyThreadState, native_thread_id));
#else
  NONE("ts.native_thread_id");
#endif
#if PY_VERSION_HEX >= 0x030D0000
  P("ts.frame", offsetof(PyThreadState, current_frame));
  NONE("cframe.current_frame");
  NONE("cframe.previous");
#elif PY_VERSION_HEX >= 0x030B0000
  P("ts.frame", offsetof(PyThreadState, cframe));
  P("cframe.current_frame", offsetof(_PyCFrame, current_frame));
  P("cframe.previous", offsetof(_PyCFrame, previous));
#else
  P("ts.frame", offsetof(PyThreadState, frame));
  NONE("cframe.current_frame");
  NONE("cframe.previous");
#endif
#if PY_VERSION_HEX >= 0x030B0000
  P("fr.previous", offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX >= 0x030D0000
  P("fr.code", offsetof(_PyInterpreterFrame, f_executable));
  P("fr.instr", offsetof(_PyInterpreterFrame, instr_ptr));
#else
  P("fr.code", offsetof(_PyInterpreterFrame, f_code));
  P("fr.instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
#if PY_VERSION_HEX < 0x030C0000
  P("fr.is_entry", offsetof(_PyInterpreterFrame, is_entry));
#else
  NONE("fr.is_entry");
#endif
  P("fr.owner", offsetof(_PyInterpreterFrame, owner));
  P("co.qualname", offsetof(PyCodeObject, co_qualname));
  P("co.linetable", offsetof(PyCodeObject, co_linetable));
  P("co.code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#else
  P("fr.previous", offsetof(PyFrameObject, f_back));
  P("fr.code", offsetof(PyFrameObject, f_code));
  P("fr.instr", offsetof(PyFrameObject, f_lasti));
  NONE("fr.is_entry");
  NONE("fr.owner");
  NONE("co.qualname");
#if PY_VERSION_HEX >= 0x030A0000
  P("co.linetable", offsetof(PyCodeObject, co_linetable));
#else
  P("co.linetable", offsetof(PyCodeObject, co_lnotab));
#endif
  NONE("co.code_adaptive");
#endif
  P("co.filename", offsetof(PyCodeObject, co_filename));
  P("co.name", offsetof(PyCodeObject, co_name));
  P("co.firstlineno", offsetof(PyCodeObject, co_firstlineno));
  P("ob.type", offsetof(PyObject, ob_type));
  P("bytes.size", offsetof(PyVarObject, ob_size));
  P("bytes.sval", offsetof(PyBytesObject, ob_sval));
  P("str.length", offsetof(PyASCIIObject, length));
  P("str.state", offsetof(PyASCIIObject, state));
  P("str.ascii_size", sizeof(PyASCIIObject));
  P("str.compact_size", sizeof(PyCompactUnicodeObject));
  P("str.data_any", offsetof(PyUnicodeObject, data.any));
#if PY_VERSION_HEX >= 0x030D0000
  /* Where each field the walker takes from _Py_DebugOffsets sits inside it. */
  P("dbg.version", offsetof(_Py_DebugOffsets, version));
  P("dbg.free_threaded", offsetof(_Py_DebugOffsets, free_threaded));
  P("dbg.runtime_state.size", offsetof(_Py_DebugOffsets, runtime_state.size));
  P("dbg.runtime_state.interpreters_head", offsetof(_Py_DebugOffsets, runtime_state.interpreters_head));
  P("dbg.interpreter_state.size", offsetof(_Py_DebugOffsets, interpreter_state.size));
  P("dbg.interpreter_state.next", offsetof(_Py_DebugOffsets, interpreter_state.next));
  P("dbg.interpreter_state.threads_head", offsetof(_Py_DebugOffsets, interpreter_state.threads_head));
  P("dbg.interpreter_state.ceval_gil", offsetof(_Py_DebugOffsets, interpreter_state.ceval_gil));
  P("dbg.interpreter_state.gil_runtime_state", offsetof(_Py_DebugOffsets, interpreter_state.gil_runtime_state));
  P("dbg.interpreter_state.gil_runtime_state_locked", offsetof(_Py_DebugOffsets, interpreter_state.gil_runtime_state_locked));
  P("dbg.interpreter_state.gil_runtime_state_holder", offsetof(_Py_DebugOffsets, interpreter_state.gil_runtime_state_holder));
  P("dbg.thread_state.size", offsetof(_Py_DebugOffsets, thread_state.size));
  P("dbg.thread_state.next", offsetof(_Py_DebugOffsets, thread_state.next));
  P("dbg.thread_state.interp", offsetof(_Py_DebugOffsets, thread_state.interp));
  P("dbg.thread_state.current_frame", offsetof(_Py_DebugOffsets, thread_state.current_frame));
  P("dbg.thread_state.thread_id", offsetof(_Py_DebugOffsets, thread_state.thread_id));
  P("dbg.thread_state.native_thread_id", offsetof(_Py_DebugOffsets, thread_state.native_thread_id));
  P("dbg.interpreter_frame.size", offsetof(_Py_DebugOffsets, interpreter_frame.size));
  P("dbg.interpreter_frame.previous", offsetof(_Py_DebugOffsets, interpreter_frame.previous));
  P("dbg.interpreter_frame.executable", offsetof(_Py_DebugOffsets, interpreter_frame.executable));
  P("dbg.interpreter_frame.instr_ptr", offsetof(_Py_DebugOffsets, interpreter_frame.instr_ptr));
  P("dbg.interpreter_frame.owner", offsetof(_Py_DebugOffsets, interpreter_frame.owner));
  P("dbg.code_object.size", offsetof(_Py_DebugOffsets, code_object.size));
  P("dbg.code_object.filename", offsetof(_Py_DebugOffsets, code_object.filename));
  P("dbg.code_object.name", offsetof(_Py_DebugOffsets, code_object.name));
  P("dbg.code_object.qualname", offsetof(_Py_DebugOffsets, code_object.qualname));
  P("dbg.code_object.linetable", offsetof(_Py_DebugOffsets, code_object.linetable));
  P("dbg.code_object.firstlineno", offsetof(_Py_DebugOffsets, code_object.firstlineno));
  P("dbg.code_object.co_code_adaptive", offsetof(_Py_DebugOffsets, code_object.co_code_adaptive));
  P("dbg.pyobject.size", offsetof(_Py_DebugOffsets, pyobject.size));
  P("dbg.pyobject.ob_type", offsetof(_Py_DebugOffsets, pyobject.ob_type));
  P("dbg.bytes_object.size", offsetof(_Py_DebugOffsets, bytes_object.size));
  P("dbg.bytes_object.ob_size", offsetof(_Py_DebugOffsets, bytes_object.ob_size));
  P("dbg.bytes_object.ob_sval", offsetof(_Py_DebugOffsets, bytes_object.ob_sval));
  P("dbg.unicode_object.size", offsetof(_Py_DebugOffsets, unicode_object.size));
  P("dbg.unicode_object.state", offsetof(_Py_DebugOffsets, unicode_object.state));
  P("dbg.unicode_object.length", offsetof(_Py_DebugOffsets, unicode_object.length));
  P("dbg.unicode_object.asciiobject_size", offsetof(_Py_DebugOffsets, unicode_object.asciiobject_size));
  P("dbg.sizeof", sizeof(_Py_DebugOffsets));
#endif
  return 0;
}
