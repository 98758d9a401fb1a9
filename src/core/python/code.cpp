#include "core/python/code.h"

#include "core/python/text.h"

namespace faultline::core::python {
namespace {

// Used when the cache is full or could not be allocated (zero-initialised).
CodeInfo g_code_scratch;

}  // namespace

const CodeInfo* code_info(const Runtime& rt, const PyLayout& l, Arena* arena, CodeInfo* cache,
                          uintptr_t code) {
  CodeInfo* slot = nullptr;
  if (cache) {
    size_t h = (code >> 4) * 0x9E3779B97F4A7C15ull >> 54;  // 10 bits: 1024 slots
    for (int probe = 0; probe < 16; ++probe) {
      CodeInfo* c = &cache[(h + probe) % kCodeCacheSlots];
      if (c->code == code) return c;
      if (c->code == 0) {
        slot = c;
        break;
      }
    }
  }
  if (!slot) slot = &g_code_scratch;
  *slot = CodeInfo{};
  slot->code = code;
  uint8_t buf[512];
  int need = l.co_firstlineno + 4;
  const int ptr_fields[] = {l.co_filename, l.co_name, l.co_qualname, l.co_linetable, l.ob_type};
  for (int off : ptr_fields) {
    if (off + 8 > need) need = off + 8;
  }
  if (need > static_cast<int>(sizeof buf) || !safe_read(buf, code, static_cast<size_t>(need))) {
    slot->error = "code object unreadable";
    return slot;
  }
  if (rt.code_type && u64_in(buf, l.ob_type) != rt.code_type) {
    slot->error = "not a code object";
    return slot;
  }
  TextError err = {nullptr};
  slot->file = read_unicode(l, u64_in(buf, l.co_filename), rt.unicode_type, arena, &err);
  if (!slot->file) {
    slot->error = "co_filename unreadable";
    return slot;
  }
  slot->name = read_unicode(l, u64_in(buf, l.co_name), rt.unicode_type, arena, &err);
  if (!slot->name) {
    slot->error = "co_name unreadable";
    return slot;
  }
  if (l.co_qualname >= 0) {
    slot->qualname = read_unicode(l, u64_in(buf, l.co_qualname), rt.unicode_type, arena, &err);
  }
  int32_t first;
  __builtin_memcpy(&first, buf + l.co_firstlineno, sizeof first);
  slot->firstlineno = first;
  uintptr_t table = u64_in(buf, l.co_linetable);
  int64_t len = -1;
  uintptr_t type = 0;
  if (table &&
      read_u64(table + static_cast<uintptr_t>(l.bytes_size), reinterpret_cast<uint64_t*>(&len)) &&
      read_u64(table + static_cast<uintptr_t>(l.ob_type), &type) &&
      (!rt.bytes_type || type == rt.bytes_type)) {
    slot->table = table + static_cast<uintptr_t>(l.bytes_sval);
    slot->table_len = len;
  } else {
    slot->table_len = -1;
  }
  if (l.co_code_adaptive >= 0)
    slot->first_instr = code + static_cast<uintptr_t>(l.co_code_adaptive);
  return slot;
}

long instr_offset(const PyLayout& l, const uint8_t* frame, const CodeInfo& c) {
  switch (l.instr) {
    case InstrKind::kLastiBytes: {
      int32_t lasti;
      __builtin_memcpy(&lasti, frame + l.fr_instr, sizeof lasti);
      return lasti;
    }
    case InstrKind::kLastiUnits: {
      int32_t lasti;
      __builtin_memcpy(&lasti, frame + l.fr_instr, sizeof lasti);
      return lasti < 0 ? -1 : static_cast<long>(lasti) * 2;
    }
    case InstrKind::kPrevInstr:
    case InstrKind::kInstrPtr: {
      uintptr_t p = u64_in(frame, l.fr_instr);
      if (p < c.first_instr) return -1;
      long units = static_cast<long>((p - c.first_instr) / 2);
      return units * 2;
    }
  }
  return -1;
}

}  // namespace faultline::core::python
