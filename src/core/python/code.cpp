#include "core/python/code.h"

#include "core/python/text.h"

namespace faultline::core::python {
namespace {

// Used when the cache is full or could not be allocated (zero-initialised).
CodeInfo g_code_scratch;

}  // namespace

CodeCache* code_cache_new(Arena* arena) {
  auto* c = arena->alloc_array<CodeCache>(1);
  if (!c) return nullptr;
  c->entries = static_cast<CodeInfo*>(
      arena->alloc_uninit(sizeof(CodeInfo) * kCodeCacheSlots, alignof(CodeInfo)));
  return c->entries ? c : nullptr;
}

const CodeInfo* code_info(const Runtime& rt, const PyLayout& l, Arena* arena, CodeCache* cache,
                          uintptr_t code) {
  CodeInfo* slot = nullptr;
  if (cache) {
    size_t h = (code >> 4) * 0x9E3779B97F4A7C15ull >> 54;  // 10 bits: 1024 slots
    for (int probe = 0; probe < 16; ++probe) {
      uint16_t* at = &cache->index[(h + probe) % kCodeCacheSlots];
      if (*at == 0) {
        if (cache->used < kCodeCacheSlots) {
          slot = &cache->entries[cache->used++];
          *at = static_cast<uint16_t>(cache->used);
        }
        break;
      }
      CodeInfo* c = &cache->entries[*at - 1];
      if (c->code == code) return c;
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
  // The three strings and the line table's bytes object, each read ahead
  // with what follows it, in one batch: a short compact string's characters
  // come with its header (two reads each were ~60% of a deep Python stack's
  // walk). The file name is the previous code object's more often than not
  // (a module's functions share it).
  uintptr_t obj[4] = {u64_in(buf, l.co_name), l.co_qualname >= 0 ? u64_in(buf, l.co_qualname) : 0,
                      u64_in(buf, l.co_filename), u64_in(buf, l.co_linetable)};
  bool file_known = cache && cache->file && obj[2] == cache->file_obj;
  if (file_known) obj[2] = 0;
  constexpr size_t kAhead = 256;
  uint8_t ahead[4][kAhead];
  void* dst[4];
  uintptr_t from[4];
  size_t len[4];
  bool ok[4] = {};
  int map[4];
  int count = 0;
  for (int i = 0; i < 4; ++i) {
    map[i] = -1;
    if (!obj[i]) continue;
    map[i] = count;
    dst[count] = ahead[i];
    from[count] = obj[i];
    len[count] = kAhead;
    ++count;
  }
  safe_read_many(dst, from, len, ok, count);
  auto pre = [&](int i) { return map[i] >= 0 && ok[map[i]] ? ahead[i] : nullptr; };
  auto got = [&](int i) { return map[i] >= 0 && ok[map[i]] ? kAhead : size_t{0}; };
  TextError err = {nullptr};
  if (file_known) {
    slot->file = cache->file;
  } else {
    slot->file = read_unicode(l, obj[2], pre(2), got(2), rt.unicode_type, arena, &err);
    if (slot->file && cache) {
      cache->file_obj = obj[2];
      cache->file = slot->file;
    }
  }
  if (!slot->file) {
    slot->error = "co_filename unreadable";
    return slot;
  }
  slot->name = read_unicode(l, obj[0], pre(0), got(0), rt.unicode_type, arena, &err);
  if (!slot->name) {
    slot->error = "co_name unreadable";
    return slot;
  }
  if (l.co_qualname >= 0) {
    slot->qualname = read_unicode(l, obj[1], pre(1), got(1), rt.unicode_type, arena, &err);
  }
  int32_t first;
  __builtin_memcpy(&first, buf + l.co_firstlineno, sizeof first);
  slot->firstlineno = first;
  uintptr_t table = obj[3];
  int64_t tlen = -1;
  uintptr_t type = 0;
  bool have = false;
  if (table && pre(3) && static_cast<size_t>(l.bytes_size) + 8 <= kAhead &&
      static_cast<size_t>(l.ob_type) + 8 <= kAhead) {
    tlen = static_cast<int64_t>(u64_in(ahead[3], l.bytes_size));
    type = u64_in(ahead[3], l.ob_type);
    have = true;
  } else if (table) {
    have = read_u64(table + static_cast<uintptr_t>(l.bytes_size),
                    reinterpret_cast<uint64_t*>(&tlen)) &&
           read_u64(table + static_cast<uintptr_t>(l.ob_type), &type);
  }
  if (have && (!rt.bytes_type || type == rt.bytes_type)) {
    slot->table = table + static_cast<uintptr_t>(l.bytes_sval);
    slot->table_len = tlen;
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
