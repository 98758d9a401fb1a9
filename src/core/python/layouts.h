// CPython struct layouts the walker reads, as data.
//
// 3.9 to 3.12 have no self-description: their offsets come from each
// version's internal headers and are checked in as one table (layouts.cpp),
// verified by tools/python-layout-probe against the real headers (ctest
// python_layouts). 3.13 and later carry _Py_DebugOffsets at the start of
// _PyRuntime; layout_from_debug_offsets() turns it into the same PyLayout,
// after checking every offset against the struct sizes it also carries.
//
// Everything here is plain data and pure functions: async-signal-safe.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace faultline::core::python {

// How a frame names the instruction it is at.
enum class InstrKind : uint8_t {
  kLastiBytes,  // 3.9: PyFrameObject.f_lasti, a byte offset into co_code
  kLastiUnits,  // 3.10: f_lasti in code units
  kPrevInstr,   // 3.11, 3.12: _PyInterpreterFrame.prev_instr (last executed)
  kInstrPtr,    // 3.13+: _PyInterpreterFrame.instr_ptr (being executed)
};

// How the code object maps instruction offsets to lines.
enum class LineTableKind : uint8_t {
  kLnotab,     // 3.9: co_lnotab byte pairs
  kLinetable,  // 3.10: co_linetable (start delta, line delta) pairs
  kLocations,  // 3.11+: co_linetable location entries
};

// Offsets in bytes; -1 where the version has no such field.
struct PyLayout {
  int minor;  // 3.<minor>
  // _PyRuntimeState
  int rt_interpreters_head;
  int rt_gil_locked;       // ceval.gil.locked (3.9-3.11, one GIL per runtime)
  int rt_gil_last_holder;  // ceval.gil.last_holder
  // PyInterpreterState
  int is_next;
  int is_tstate_head;
  int is_ceval_gil;  // ceval.gil: pointer to the interpreter's GIL (3.12+)
  // struct _gil_runtime_state, behind is_ceval_gil (3.12+)
  int gil_locked;
  int gil_last_holder;
  // PyThreadState
  int ts_next;
  int ts_interp;
  int ts_thread_id;          // pthread_t
  int ts_native_thread_id;   // kernel tid (3.11+)
  int ts_frame;              // 3.9/3.10: frame; 3.11/3.12: cframe; 3.13+: current_frame
  int cframe_current_frame;  // _PyCFrame.current_frame (3.11/3.12)
  int cframe_previous;       // _PyCFrame.previous (3.11/3.12)
  // PyFrameObject (3.9/3.10) or _PyInterpreterFrame (3.11+)
  int fr_previous;
  int fr_code;
  int fr_instr;
  int fr_is_entry;  // 3.11
  int fr_owner;     // 3.11+
  // PyCodeObject
  int co_filename;
  int co_name;
  int co_qualname;  // 3.11+
  int co_firstlineno;
  int co_linetable;      // co_lnotab in 3.9
  int co_code_adaptive;  // first instruction (3.11+)
  // PyObject, PyBytesObject, PyUnicodeObject
  int ob_type;
  int bytes_size;
  int bytes_sval;
  int str_length;
  int str_state;
  int str_ascii_size;    // sizeof(PyASCIIObject): compact ASCII data follows
  int str_compact_size;  // sizeof(PyCompactUnicodeObject): compact data follows
  int str_data_any;      // PyUnicodeObject.data.any (legacy strings)
  InstrKind instr;
  LineTableKind lines;
  int8_t owner_cstack;            // owner value of the C-stack shim frame, -1 if none
  int8_t owner_first_shim;        // owners >= this are not Python frames (-1: none)
  uintptr_t executable_tag_mask;  // bits to clear in f_executable (3.14 _PyStackRef)
};

// The checked-in table for 3.9-3.12; nullptr for other minors.
const PyLayout* layout_for_minor(int minor);

// Reads a 3.13+ _Py_DebugOffsets image (bytes copied from the start of
// _PyRuntime) into *out. Returns nullptr on success, else why it was refused
// (bad cookie, unknown layout, an offset outside its struct).
const char* layout_from_debug_offsets(const uint8_t* image, size_t image_len, PyLayout* out,
                                      uint64_t* hexversion);

// Bytes of _PyRuntime to copy for layout_from_debug_offsets().
constexpr size_t kDebugOffsetsMaxBytes = 1024;

// For the layout test: calls fn(name, value) for every field of a layout, with
// the names tools/python-layout-probe prints.
void for_each_layout_field(const PyLayout& l, void (*fn)(const char* name, long value, void* ctx),
                           void* ctx);

// For the layout test: the position of each field the walker takes from
// _Py_DebugOffsets, in the 3.13 layout (names as the probe prints them).
void for_each_debug_offset_position(int minor, void (*fn)(const char* name, long value, void* ctx),
                                    void* ctx);

}  // namespace faultline::core::python
