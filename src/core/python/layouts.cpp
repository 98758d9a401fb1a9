// The per-version layout data. See layouts.h; the numbers for 3.9-3.12 are
// what tools/python-layout-probe prints for each version's headers, and the
// python_layouts test fails when they drift apart.
#include "core/python/layouts.h"

namespace faultline::core::python {
namespace {

// One row per minor version. Field order as in PyLayout.
constexpr PyLayout kLayouts[] = {
    // clang-format off
    // 3.9: PyFrameObject chain from tstate->frame; co_lnotab; f_lasti in bytes.
    {9,
     32, 368, 360,           // runtime: interpreters.head, ceval.gil.locked, .last_holder
     0, 8, -1, -1, -1,       // interp: next, tstate_head, ceval.gil, gil.locked, gil.last_holder
     8, 16, 176, -1, 24, -1, -1, // tstate: next, interp, thread_id, native_thread_id, frame, cframe.current_frame, .previous
     24, 32, 104, -1, -1,    // frame: f_back, f_code, f_lasti, is_entry, owner
     104, 112, -1, 40, 120, -1,  // code: filename, name, qualname, firstlineno, lnotab, code_adaptive
     8, 16, 32,              // ob_type, bytes ob_size, ob_sval
     16, 32, 48, 72, 72,     // str: length, state, sizeof ascii, sizeof compact, data.any
     InstrKind::kLastiBytes, LineTableKind::kLnotab, -1, -1, 0},
    // 3.10: as 3.9, f_lasti counts code units, co_linetable replaces co_lnotab.
    {10,
     32, 368, 360,
     0, 8, -1, -1, -1,
     8, 16, 176, -1, 24, -1, -1,
     24, 32, 96, -1, -1,
     104, 112, -1, 40, 120, -1,
     8, 16, 32,
     16, 32, 48, 72, 72,
     InstrKind::kLastiUnits, LineTableKind::kLinetable, -1, -1, 0},
    // 3.11: _PyInterpreterFrame via tstate->cframe->current_frame; is_entry
    // marks the first frame of each C-level call into the eval loop.
    {11,
     40, 376, 368,
     0, 16, -1, -1, -1,
     8, 16, 152, 160, 56, 8, 16,
     48, 32, 56, 68, 69,
     112, 120, 128, 72, 136, 184,
     8, 16, 32,
     16, 32, 48, 72, 72,
     InstrKind::kPrevInstr, LineTableKind::kLocations, -1, -1, 0},
    // 3.12: one GIL per interpreter (interp->ceval.gil); each eval call starts
    // with a shim frame owned by the C stack (owner 3).
    {12,
     40, -1, -1,
     0, 72, 384, 16, 8,
     8, 16, 136, 144, 56, 0, 8,
     8, 0, 56, -1, 70,
     112, 120, 128, 68, 136, 192,
     8, 16, 32,
     16, 32, 40, 56, 56,
     InstrKind::kPrevInstr, LineTableKind::kLocations, 3, 3, 0},
    // clang-format on
};

// Where each field the walker needs sits inside _Py_DebugOffsets. The struct
// grew between 3.13 and 3.14 (fields inserted in interpreter_state,
// interpreter_frame and code_object, set_object added), so each layout of it
// is one row here.
struct DebugOffsetsPositions {
  int minor;
  int free_threaded;
  int rt_size, rt_interpreters_head;
  int is_size, is_next, is_threads_head, is_ceval_gil, is_gil_runtime_state, is_gil_locked,
      is_gil_holder;
  int ts_size, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_thread_id;
  int fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner;
  int co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_code_adaptive;
  int ob_size, ob_type;
  int bytes_size, bytes_ob_size, bytes_ob_sval;
  int str_size, str_state, str_length, str_ascii_size;
  int total;  // bytes of _Py_DebugOffsets up to the last field used
  int8_t owner_cstack;
  int8_t owner_first_shim;
  uintptr_t executable_tag_mask;
};

constexpr DebugOffsetsPositions kDebugPositions[] = {
    // clang-format off
    // 3.13.0 (checked by the probe against Include/internal/pycore_runtime.h).
    {13, 16,
     24, 40,
     48, 64, 72, 112, 120, 136, 144,
     152, 168, 176, 184, 192, 200,
     224, 232, 240, 248, 264,
     272, 280, 288, 296, 304, 312, 344,
     352, 360,
     512, 520, 528,
     536, 544, 552, 560,
     568, 3, 3, 0},
    // 3.14 (pycore_debug_offsets.h): threads_main, code_object_generation and
    // tlbc_generation in interpreter_state, stackpointer and tlbc_index in
    // interpreter_frame, co_tlbc in code_object, set_object before dict.
    // f_executable is a _PyStackRef whose low bits are tags. Owner 3 is now
    // FRAME_OWNED_BY_INTERPRETER: the entry frame each eval call pushes on
    // the C stack (and the thread's base frame) has it; 4 (CSTACK) is unused.
    {14, 16,
     24, 40,
     48, 64, 72, 120, 128, 144, 152,
     176, 192, 200, 208, 216, 224,
     248, 256, 264, 272, 288,
     312, 320, 328, 336, 344, 352, 384,
     400, 408,
     592, 600, 608,
     616, 624, 632, 640,
     648, 3, 3, 3},
    // clang-format on
};

uint64_t u64_at(const uint8_t* image, int pos) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | image[pos + i];
  return v;
}

// One offset from the image, checked to lie with its 8-byte field inside a
// struct of `struct_size` bytes. -1 if it does not.
int checked_offset(const uint8_t* image, int pos, uint64_t struct_size, uint64_t field_size) {
  uint64_t v = u64_at(image, pos);
  if (v + field_size > struct_size || v > 0x7fffffff) return -1;
  return static_cast<int>(v);
}

}  // namespace

const PyLayout* layout_for_minor(int minor) {
  for (const PyLayout& l : kLayouts) {
    if (l.minor == minor) return &l;
  }
  return nullptr;
}

const char* layout_from_debug_offsets(const uint8_t* image, size_t image_len, PyLayout* out,
                                      uint64_t* hexversion) {
  static const char kCookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};
  if (image_len < 24) return "python: _PyRuntime too short for _Py_DebugOffsets";
  for (int i = 0; i < 8; ++i) {
    if (image[i] != static_cast<uint8_t>(kCookie[i])) {
      return "python: _Py_DebugOffsets cookie \"xdebugpy\" not found";
    }
  }
  uint64_t version = u64_at(image, 8);
  int major = static_cast<int>((version >> 24) & 0xff);
  int minor = static_cast<int>((version >> 16) & 0xff);
  if (major != 3 || minor < 13) return "python: _Py_DebugOffsets version is not 3.13+";
  // Newer versions than we know keep the 3.14 layout until proven otherwise;
  // the bounds checks below refuse it if that is wrong.
  const DebugOffsetsPositions* p = nullptr;
  for (const DebugOffsetsPositions& d : kDebugPositions) {
    if (d.minor <= minor) p = &d;
  }
  if (!p || image_len < static_cast<size_t>(p->total)) {
    return "python: _Py_DebugOffsets layout unknown";
  }
  if (u64_at(image, p->free_threaded) != 0) {
    return "python: free-threaded build: frame walking not supported";
  }
  *hexversion = version;

  // Sizes first: sane bounds (a corrupt or foreign image must not send the
  // walker to read megabytes per object).
  uint64_t rt = u64_at(image, p->rt_size), is = u64_at(image, p->is_size),
           ts = u64_at(image, p->ts_size), fr = u64_at(image, p->fr_size),
           co = u64_at(image, p->co_size), ob = u64_at(image, p->ob_size),
           by = u64_at(image, p->bytes_size), st = u64_at(image, p->str_size);
  if (rt == 0 || rt > (4u << 20) || is == 0 || is > (4u << 20) || ts == 0 || ts > 65536 ||
      fr == 0 || fr > 4096 || co == 0 || co > 4096 || ob < 16 || ob > 64 || by == 0 || by > 256 ||
      st == 0 || st > 256) {
    return "python: _Py_DebugOffsets struct sizes out of range";
  }
  PyLayout l = {};
  l.minor = minor;
  l.rt_interpreters_head = checked_offset(image, p->rt_interpreters_head, rt, 8);
  l.rt_gil_locked = -1;
  l.rt_gil_last_holder = -1;
  l.is_next = checked_offset(image, p->is_next, is, 8);
  l.is_tstate_head = checked_offset(image, p->is_threads_head, is, 8);
  l.is_ceval_gil = checked_offset(image, p->is_ceval_gil, is, 8);
  // The debug offsets give locked/last_holder as offsets of the interpreter's
  // own _gil; the walker follows ceval.gil (which may point to the main
  // interpreter's GIL), so keep them relative to the GIL struct.
  int gil_rs = checked_offset(image, p->is_gil_runtime_state, is, 8);
  int gil_locked = checked_offset(image, p->is_gil_locked, is, 4);
  int gil_holder = checked_offset(image, p->is_gil_holder, is, 8);
  l.gil_locked = (gil_rs >= 0 && gil_locked >= gil_rs) ? gil_locked - gil_rs : -1;
  l.gil_last_holder = (gil_rs >= 0 && gil_holder >= gil_rs) ? gil_holder - gil_rs : -1;
  l.ts_next = checked_offset(image, p->ts_next, ts, 8);
  l.ts_interp = checked_offset(image, p->ts_interp, ts, 8);
  l.ts_thread_id = checked_offset(image, p->ts_thread_id, ts, 8);
  l.ts_native_thread_id = checked_offset(image, p->ts_native_thread_id, ts, 8);
  l.ts_frame = checked_offset(image, p->ts_current_frame, ts, 8);
  l.cframe_current_frame = -1;
  l.cframe_previous = -1;
  l.fr_previous = checked_offset(image, p->fr_previous, fr, 8);
  l.fr_code = checked_offset(image, p->fr_executable, fr, 8);
  l.fr_instr = checked_offset(image, p->fr_instr_ptr, fr, 8);
  l.fr_is_entry = -1;
  l.fr_owner = checked_offset(image, p->fr_owner, fr, 1);
  l.co_filename = checked_offset(image, p->co_filename, co, 8);
  l.co_name = checked_offset(image, p->co_name, co, 8);
  l.co_qualname = checked_offset(image, p->co_qualname, co, 8);
  l.co_firstlineno = checked_offset(image, p->co_firstlineno, co, 4);
  l.co_linetable = checked_offset(image, p->co_linetable, co, 8);
  l.co_code_adaptive = checked_offset(image, p->co_code_adaptive, co, 2);
  l.ob_type = checked_offset(image, p->ob_type, ob, 8);
  l.bytes_size = checked_offset(image, p->bytes_ob_size, by, 8);
  l.bytes_sval = checked_offset(image, p->bytes_ob_sval, by, 1);
  l.str_state = checked_offset(image, p->str_state, st, 4);
  l.str_length = checked_offset(image, p->str_length, st, 8);
  l.str_ascii_size = checked_offset(image, p->str_ascii_size, st, 0);
  // PyUnicodeObject is PyCompactUnicodeObject followed by the data pointer.
  l.str_compact_size = st >= 8 ? static_cast<int>(st - 8) : -1;
  l.str_data_any = l.str_compact_size;
  l.instr = InstrKind::kInstrPtr;
  l.lines = LineTableKind::kLocations;
  l.owner_cstack = p->owner_cstack;
  l.owner_first_shim = p->owner_first_shim;
  l.executable_tag_mask = p->executable_tag_mask;
  // asciiobject_size is a size, not an offset: it must lie within the struct.
  l.str_ascii_size = static_cast<int>(u64_at(image, p->str_ascii_size));
  if (u64_at(image, p->str_ascii_size) > st || l.str_ascii_size < 16) l.str_ascii_size = -1;

  const int required[] = {l.rt_interpreters_head,
                          l.is_next,
                          l.is_tstate_head,
                          l.ts_next,
                          l.ts_interp,
                          l.ts_thread_id,
                          l.ts_frame,
                          l.fr_previous,
                          l.fr_code,
                          l.fr_instr,
                          l.fr_owner,
                          l.co_filename,
                          l.co_name,
                          l.co_firstlineno,
                          l.co_linetable,
                          l.co_code_adaptive,
                          l.ob_type,
                          l.bytes_size,
                          l.bytes_sval,
                          l.str_state,
                          l.str_length,
                          l.str_ascii_size,
                          l.str_compact_size};
  for (int v : required) {
    if (v < 0) return "python: _Py_DebugOffsets: an offset lies outside its struct";
  }
  *out = l;
  return nullptr;
}

void for_each_layout_field(const PyLayout& l, void (*fn)(const char*, long, void*), void* ctx) {
  struct Field {
    char name[48];  // text, not a pointer: no relocation of the table at load
    int PyLayout::*member;
  };
  static const Field kFields[] = {
      {"rt.interpreters_head", &PyLayout::rt_interpreters_head},
      {"rt.gil_locked", &PyLayout::rt_gil_locked},
      {"rt.gil_last_holder", &PyLayout::rt_gil_last_holder},
      {"is.next", &PyLayout::is_next},
      {"is.tstate_head", &PyLayout::is_tstate_head},
      {"is.ceval_gil", &PyLayout::is_ceval_gil},
      {"gil.locked", &PyLayout::gil_locked},
      {"gil.last_holder", &PyLayout::gil_last_holder},
      {"ts.next", &PyLayout::ts_next},
      {"ts.interp", &PyLayout::ts_interp},
      {"ts.thread_id", &PyLayout::ts_thread_id},
      {"ts.native_thread_id", &PyLayout::ts_native_thread_id},
      {"ts.frame", &PyLayout::ts_frame},
      {"cframe.current_frame", &PyLayout::cframe_current_frame},
      {"cframe.previous", &PyLayout::cframe_previous},
      {"fr.previous", &PyLayout::fr_previous},
      {"fr.code", &PyLayout::fr_code},
      {"fr.instr", &PyLayout::fr_instr},
      {"fr.is_entry", &PyLayout::fr_is_entry},
      {"fr.owner", &PyLayout::fr_owner},
      {"co.filename", &PyLayout::co_filename},
      {"co.name", &PyLayout::co_name},
      {"co.qualname", &PyLayout::co_qualname},
      {"co.firstlineno", &PyLayout::co_firstlineno},
      {"co.linetable", &PyLayout::co_linetable},
      {"co.code_adaptive", &PyLayout::co_code_adaptive},
      {"ob.type", &PyLayout::ob_type},
      {"bytes.size", &PyLayout::bytes_size},
      {"bytes.sval", &PyLayout::bytes_sval},
      {"str.length", &PyLayout::str_length},
      {"str.state", &PyLayout::str_state},
      {"str.ascii_size", &PyLayout::str_ascii_size},
      {"str.compact_size", &PyLayout::str_compact_size},
      {"str.data_any", &PyLayout::str_data_any},
  };
  for (const Field& f : kFields) fn(f.name, l.*(f.member), ctx);
}

void for_each_debug_offset_position(int minor, void (*fn)(const char*, long, void*), void* ctx) {
  const DebugOffsetsPositions* p = nullptr;
  for (const DebugOffsetsPositions& d : kDebugPositions) {
    if (d.minor == minor) p = &d;
  }
  if (!p) return;
  struct Field {
    char name[56];  // text, not a pointer: no relocation of the table at load
    int DebugOffsetsPositions::*member;
  };
  static const Field kFields[] = {
      {"dbg.free_threaded", &DebugOffsetsPositions::free_threaded},
      {"dbg.runtime_state.size", &DebugOffsetsPositions::rt_size},
      {"dbg.runtime_state.interpreters_head", &DebugOffsetsPositions::rt_interpreters_head},
      {"dbg.interpreter_state.size", &DebugOffsetsPositions::is_size},
      {"dbg.interpreter_state.next", &DebugOffsetsPositions::is_next},
      {"dbg.interpreter_state.threads_head", &DebugOffsetsPositions::is_threads_head},
      {"dbg.interpreter_state.ceval_gil", &DebugOffsetsPositions::is_ceval_gil},
      {"dbg.interpreter_state.gil_runtime_state", &DebugOffsetsPositions::is_gil_runtime_state},
      {"dbg.interpreter_state.gil_runtime_state_locked", &DebugOffsetsPositions::is_gil_locked},
      {"dbg.interpreter_state.gil_runtime_state_holder", &DebugOffsetsPositions::is_gil_holder},
      {"dbg.thread_state.size", &DebugOffsetsPositions::ts_size},
      {"dbg.thread_state.next", &DebugOffsetsPositions::ts_next},
      {"dbg.thread_state.interp", &DebugOffsetsPositions::ts_interp},
      {"dbg.thread_state.current_frame", &DebugOffsetsPositions::ts_current_frame},
      {"dbg.thread_state.thread_id", &DebugOffsetsPositions::ts_thread_id},
      {"dbg.thread_state.native_thread_id", &DebugOffsetsPositions::ts_native_thread_id},
      {"dbg.interpreter_frame.size", &DebugOffsetsPositions::fr_size},
      {"dbg.interpreter_frame.previous", &DebugOffsetsPositions::fr_previous},
      {"dbg.interpreter_frame.executable", &DebugOffsetsPositions::fr_executable},
      {"dbg.interpreter_frame.instr_ptr", &DebugOffsetsPositions::fr_instr_ptr},
      {"dbg.interpreter_frame.owner", &DebugOffsetsPositions::fr_owner},
      {"dbg.code_object.size", &DebugOffsetsPositions::co_size},
      {"dbg.code_object.filename", &DebugOffsetsPositions::co_filename},
      {"dbg.code_object.name", &DebugOffsetsPositions::co_name},
      {"dbg.code_object.qualname", &DebugOffsetsPositions::co_qualname},
      {"dbg.code_object.linetable", &DebugOffsetsPositions::co_linetable},
      {"dbg.code_object.firstlineno", &DebugOffsetsPositions::co_firstlineno},
      {"dbg.code_object.co_code_adaptive", &DebugOffsetsPositions::co_code_adaptive},
      {"dbg.pyobject.size", &DebugOffsetsPositions::ob_size},
      {"dbg.pyobject.ob_type", &DebugOffsetsPositions::ob_type},
      {"dbg.bytes_object.size", &DebugOffsetsPositions::bytes_size},
      {"dbg.bytes_object.ob_size", &DebugOffsetsPositions::bytes_ob_size},
      {"dbg.bytes_object.ob_sval", &DebugOffsetsPositions::bytes_ob_sval},
      {"dbg.unicode_object.size", &DebugOffsetsPositions::str_size},
      {"dbg.unicode_object.state", &DebugOffsetsPositions::str_state},
      {"dbg.unicode_object.length", &DebugOffsetsPositions::str_length},
      {"dbg.unicode_object.asciiobject_size", &DebugOffsetsPositions::str_ascii_size},
  };
  for (const Field& f : kFields) fn(f.name, p->*(f.member), ctx);
}

}  // namespace faultline::core::python
