#include "core/cfi_unwind.h"

#include <stddef.h>

#include "core/safe_read.h"

namespace faultline::core {
namespace {

// DWARF register number -> index in ucontext's gregs.
constexpr int kGregOf[kCfiNumRegs] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                      REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                      REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};

// Reads remote bytes sequentially through a small buffer, never past `end`,
// and never more than the page holds when a bigger read fails (a record
// may end right before an unmapped page).
class Stream {
 public:
  Stream(uintptr_t addr, uintptr_t end) : pos_(addr), end_(end) {}
  uintptr_t pos() const { return pos_; }
  uintptr_t end() const { return end_; }
  void set_end(uintptr_t end) { end_ = end; }
  // Forward only and within the record: a length read from the table
  // (an expression's, the augmentation's) that points before the current
  // position (an unsigned wrap) or past the end would loop or run away.
  void seek(uintptr_t pos) {
    if (pos < pos_ || pos > end_) {
      ok_ = false;
      return;
    }
    pos_ = pos;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ >= end_; }

  uint8_t u8() {
    if (!ok_ || pos_ >= end_) {
      ok_ = false;
      return 0;
    }
    if (pos_ < base_ || pos_ >= base_ + len_) {
      if (!refill()) {
        ok_ = false;
        return 0;
      }
    }
    return buf_[pos_++ - base_];
  }
  uint64_t fixed(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = u8();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok_ = false;
    return 0;
  }
  int64_t sleb() {
    uint64_t v = 0;
    int shift = 0;
    uint8_t b;
    do {
      if (shift >= 64) {
        ok_ = false;
        return 0;
      }
      b = u8();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~static_cast<uint64_t>(0) << shift;
    return static_cast<int64_t>(v);
  }
  // A pointer in an .eh_frame encoding. `datarel` is the base for
  // DW_EH_PE_datarel (the .eh_frame_hdr start); 0 where it cannot occur.
  uintptr_t encoded(uint8_t enc, uintptr_t datarel = 0) {
    if (enc == 0xff) return 0;  // DW_EH_PE_omit
    uintptr_t field = pos_;
    uint64_t v;
    switch (enc & 0x0f) {
      case 0x00:
        v = fixed(8);
        break;
      case 0x01:
        v = uleb();
        break;
      case 0x02:
        v = fixed(2);
        break;
      case 0x03:
        v = fixed(4);
        break;
      case 0x04:
        v = fixed(8);
        break;
      case 0x09:
        v = static_cast<uint64_t>(sleb());
        break;
      case 0x0a:
        v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(fixed(2))));
        break;
      case 0x0b:
        v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(fixed(4))));
        break;
      case 0x0c:
        v = fixed(8);
        break;
      default:
        ok_ = false;
        return 0;
    }
    switch (enc & 0x70) {
      case 0x00:
        break;
      case 0x10:
        v += field;
        break;
      case 0x30:
        if (!datarel) ok_ = false;
        v += datarel;
        break;
      default:
        ok_ = false;
        return 0;  // textrel, funcrel, aligned: not used on x86-64
    }
    if (enc & 0x80) {  // indirect
      uintptr_t p = 0;
      if (!safe_read_obj(&p, v)) ok_ = false;
      v = p;
    }
    return v;
  }

 private:
  bool refill() {
    uintptr_t n = end_ - pos_;
    if (n > sizeof buf_) n = sizeof buf_;
    if (safe_read(buf_, pos_, n)) {
      base_ = pos_;
      len_ = n;
      return true;
    }
    uintptr_t page_left = 4096 - (pos_ & 4095);
    if (page_left < n && safe_read(buf_, pos_, page_left)) {
      base_ = pos_;
      len_ = page_left;
      return true;
    }
    return false;
  }

  uintptr_t pos_, end_;
  uintptr_t base_ = 0, len_ = 0;
  bool ok_ = true;
  uint8_t buf_[256];
};

// Stack memory, read through a window: a frame's saved registers lie a few
// bytes apart and the caller's just above, so one read serves many.
class StackWindow {
 public:
  bool read(uintptr_t addr, uintptr_t* out) {
    if (addr < base_ || addr + sizeof *out > base_ + len_ || addr + sizeof *out < addr) {
      if (!refill(addr)) return safe_read_obj(out, addr);
    }
    __builtin_memcpy(out, buf_ + (addr - base_), sizeof *out);
    return true;
  }

 private:
  bool refill(uintptr_t addr) {
    if (safe_read(buf_, addr, sizeof buf_)) {
      base_ = addr;
      len_ = sizeof buf_;
      return true;
    }
    uintptr_t page_left = 4096 - (addr & 4095);
    if (page_left >= sizeof(uintptr_t) && page_left < sizeof buf_ &&
        safe_read(buf_, addr, page_left)) {
      base_ = addr;
      len_ = page_left;
      return true;
    }
    return false;
  }

  uintptr_t base_ = 0, len_ = 0;
  uint8_t buf_[512];
};

enum RuleKind : uint8_t {
  kUnset = 0,  // not mentioned: same value
  kUndefined,
  kSame,
  kOffset,     // saved at CFA + value
  kValOffset,  // is CFA + value
  kRegister,   // in register value
  kExpr,       // saved at the address the expression yields (CFA pushed first)
  kValExpr,    // is the value the expression yields
};

struct Rule {
  RuleKind kind;
  uint32_t len;   // expression length
  int64_t value;  // offset, register, or expression address
};

struct Row {
  Rule cfa;  // kRegister (value: reg, len unused, off in cfa_off) or kValExpr
  int64_t cfa_off;
  Rule regs[kCfiNumRegs];
  bool has_expr;
  bool signal;  // the CIE has the 'S' augmentation
};

struct Cie {
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra;
  uint8_t fde_enc;
  bool has_z;
  bool signal;
  uintptr_t insns, end;
};

constexpr int kMaxRemember = 4;

// ---- the row cache ----------------------------------------------------------

struct CacheEntry {
  volatile uint32_t seq;  // odd while written
  uint32_t gen;
  uintptr_t key;
  Row row;
};
constexpr int kCacheSize = 2048;
CacheEntry g_cache[kCacheSize];
volatile uint32_t g_generation = 1;

size_t cache_slot(uintptr_t key) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 53) & (kCacheSize - 1);
}

bool cache_get(uintptr_t key, Row* out) {
  CacheEntry& e = g_cache[cache_slot(key)];
  uint32_t s1 = __atomic_load_n(&e.seq, __ATOMIC_ACQUIRE);
  if (s1 & 1) return false;
  uint32_t gen = __atomic_load_n(&g_generation, __ATOMIC_RELAXED);
  if (e.gen != gen || e.key != key) return false;
  __builtin_memcpy(out, &e.row, sizeof *out);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&e.seq, __ATOMIC_RELAXED) == s1 && e.key == key && e.gen == gen;
}

void cache_put(uintptr_t key, const Row& row) {
  CacheEntry& e = g_cache[cache_slot(key)];
  uint32_t s = __atomic_load_n(&e.seq, __ATOMIC_ACQUIRE);
  if ((s & 1) ||
      !__atomic_compare_exchange_n(&e.seq, &s, s + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    return;  // another thread is writing it: skip, never wait
  }
  e.key = key;
  e.gen = __atomic_load_n(&g_generation, __ATOMIC_RELAXED);
  __builtin_memcpy(&e.row, &row, sizeof row);
  __atomic_store_n(&e.seq, s + 2, __ATOMIC_RELEASE);
}

// ---- tables -------------------------------------------------------------------

// The table's location and size from the .eh_frame_hdr header.
CfiStatus read_hdr(uintptr_t hdr, uintptr_t* table, uint64_t* count) {
  uint8_t head[4];
  if (!safe_read(head, hdr, sizeof head)) return CfiStatus::kUnreadable;
  if (head[0] != 1) return CfiStatus::kNoTable;
  Stream s(hdr + 4, hdr + 4 + 16);
  s.encoded(head[1], hdr);  // eh_frame_ptr
  *count = s.encoded(head[2], hdr);
  if (!s.ok()) return CfiStatus::kUnreadable;
  // ld always writes the table as datarel sdata4 pairs; anything else
  // is left to the fallback.
  if (head[3] != 0x3b || *count == 0) return CfiStatus::kNoTable;
  *table = s.pos();
  return CfiStatus::kStepped;
}

// Finds the FDE for pc in the module's .eh_frame_hdr search table.
CfiStatus find_fde(const CfiModule& m, uintptr_t pc, uintptr_t* fde) {
  uintptr_t hdr = m.eh_frame_hdr;
  uintptr_t table = m.table;
  uint64_t count = m.count;
  if (!table) {
    CfiStatus st = read_hdr(hdr, &table, &count);
    if (st != CfiStatus::kStepped) return st;
  }
  int64_t rel = static_cast<int64_t>(pc - hdr);
  constexpr uint64_t kChunk = 64;
  uint64_t lo = 0, hi = count;  // answer: the last entry with start <= pc
  if (m.index && m.index_len) {
    // Our own copy of every kCfiIndexStride-th start: the stretch to read.
    uint32_t a = 0, b = m.index_len;  // first index entry > rel
    while (a < b) {
      uint32_t mid = a + (b - a) / 2;
      if (m.index[mid] <= rel)
        a = mid + 1;
      else
        b = mid;
    }
    if (a == 0) return CfiStatus::kNoFde;
    lo = static_cast<uint64_t>(a - 1) * kCfiIndexStride;
    hi = lo + kCfiIndexStride < count ? lo + kCfiIndexStride : count;
  }
  // Binary search over remote memory: probe single entries while the range
  // is wide, then read the last stretch in one go.
  int32_t pair[2];
  while (hi - lo > kChunk) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (!safe_read(pair, table + mid * 8, 4)) return CfiStatus::kUnreadable;
    if (pair[0] <= rel)
      lo = mid;
    else
      hi = mid;
  }
  int32_t chunk[kChunk * 2];
  uint64_t n = hi - lo;
  if (!safe_read(chunk, table + lo * 8, n * 8)) return CfiStatus::kUnreadable;
  int64_t found = -1;
  for (uint64_t i = 0; i < n; ++i) {
    if (chunk[2 * i] <= rel)
      found = static_cast<int64_t>(i);
    else
      break;
  }
  if (found < 0) return CfiStatus::kNoFde;
  *fde = hdr + static_cast<int64_t>(chunk[2 * found + 1]);
  return CfiStatus::kStepped;
}

bool parse_cie(uintptr_t addr, Cie* cie) {
  Stream s(addr, addr + 64);  // a CIE is short: one read
  uint64_t len = s.fixed(4);
  uintptr_t start = s.pos();
  if (len == 0xffffffff) {
    s.set_end(addr + 12);
    len = s.fixed(8);
    start = s.pos();
  }
  if (!s.ok() || len == 0 || len > (1u << 24)) return false;
  s.set_end(start + len);  // the CIE itself
  uint64_t id = s.fixed(len > 0xffffffffull ? 8 : 4);
  if (id != 0) return false;
  uint8_t version = s.u8();
  if (version != 1 && version != 3 && version != 4) return false;
  char aug[8];
  int naug = 0;
  for (;;) {
    uint8_t c = s.u8();
    if (!s.ok()) return false;
    if (c == 0) break;
    if (naug >= static_cast<int>(sizeof aug) - 1) return false;
    aug[naug++] = static_cast<char>(c);
  }
  aug[naug] = '\0';
  if (version == 4) {
    s.u8();  // address size
    s.u8();  // segment selector size
  }
  cie->code_align = s.uleb();
  cie->data_align = s.sleb();
  cie->ra = version == 1 ? s.u8() : s.uleb();
  cie->fde_enc = 0;  // absptr
  cie->has_z = naug > 0 && aug[0] == 'z';
  cie->signal = false;
  if (naug > 0 && !cie->has_z && !(naug == 1 && aug[0] == 'S')) return false;
  if (cie->has_z) {
    uint64_t auglen = s.uleb();
    uintptr_t augend = s.pos() + auglen;
    for (int i = 1; i < naug && s.ok(); ++i) {
      switch (aug[i]) {
        case 'L':
          s.u8();
          break;
        case 'P': {
          uint8_t enc = s.u8();
          s.encoded(enc);
          break;
        }
        case 'R':
          cie->fde_enc = s.u8();
          break;
        case 'S':
          cie->signal = true;
          break;
        default:
          i = naug;
          break;  // unknown: the length lets us skip the rest
      }
    }
    s.seek(augend);
  } else if (naug == 1) {
    cie->signal = true;
  }
  cie->insns = s.pos();
  cie->end = start + len;
  return s.ok() && cie->ra == kCfiRip && cie->insns <= cie->end;
}

// Runs a call-frame program. Stops before the first advance past `target`
// (UINTPTR_MAX for a CIE's initial instructions).
bool run_program(uintptr_t insns, uintptr_t end, const Cie& cie, uintptr_t loc, uintptr_t target,
                 const Row* initial, Row* row) {
  Stream s(insns, end);
  Row saved[kMaxRemember];
  int nsaved = 0;
  auto reg_ok = [](uint64_t r) { return r < kCfiNumRegs; };
  while (!s.at_end()) {
    uint8_t op = s.u8();
    if (!s.ok()) return false;
    uint8_t hi = op & 0xc0, low = op & 0x3f;
    if (hi == 0x40) {
      loc += low * cie.code_align;
      if (loc > target) return true;
      continue;
    }
    if (hi == 0x80) {
      int64_t off = static_cast<int64_t>(s.uleb()) * cie.data_align;
      if (reg_ok(low)) row->regs[low] = {kOffset, 0, off};
      continue;
    }
    if (hi == 0xc0) {
      if (reg_ok(low)) row->regs[low] = initial ? initial->regs[low] : Rule{};
      continue;
    }
    uint64_t reg, delta;
    switch (op) {
      case 0x00:
        break;    // nop
      case 0x01:  // set_loc
        loc = s.encoded(cie.fde_enc);
        if (loc > target) return s.ok();
        break;
      case 0x02:
      case 0x03:
      case 0x04:
        delta = s.fixed(op == 0x02 ? 1 : op == 0x03 ? 2 : 4);
        loc += delta * cie.code_align;
        if (loc > target) return s.ok();
        break;
      case 0x05:  // offset_extended
        reg = s.uleb();
        delta = s.uleb();
        if (reg_ok(reg))
          row->regs[reg] = {kOffset, 0, static_cast<int64_t>(delta) * cie.data_align};
        break;
      case 0x06:  // restore_extended
        reg = s.uleb();
        if (reg_ok(reg)) row->regs[reg] = initial ? initial->regs[reg] : Rule{};
        break;
      case 0x07:  // undefined
        reg = s.uleb();
        if (reg_ok(reg)) row->regs[reg] = {kUndefined, 0, 0};
        break;
      case 0x08:  // same_value
        reg = s.uleb();
        if (reg_ok(reg)) row->regs[reg] = {kSame, 0, 0};
        break;
      case 0x09: {  // register
        reg = s.uleb();
        uint64_t other = s.uleb();
        if (reg_ok(reg)) {
          if (!reg_ok(other)) return false;
          row->regs[reg] = {kRegister, 0, static_cast<int64_t>(other)};
        }
        break;
      }
      case 0x0a:  // remember_state
        if (nsaved >= kMaxRemember) return false;
        saved[nsaved++] = *row;
        break;
      case 0x0b:  // restore_state: the CFA rule is part of the saved row too
        if (nsaved == 0) return false;
        *row = saved[--nsaved];
        break;
      case 0x0c:  // def_cfa
        reg = s.uleb();
        row->cfa = {kRegister, 0, static_cast<int64_t>(reg)};
        row->cfa_off = static_cast<int64_t>(s.uleb());
        if (!reg_ok(reg)) return false;
        break;
      case 0x0d:  // def_cfa_register
        reg = s.uleb();
        if (!reg_ok(reg)) return false;
        row->cfa = {kRegister, 0, static_cast<int64_t>(reg)};
        break;
      case 0x0e:  // def_cfa_offset
        row->cfa_off = static_cast<int64_t>(s.uleb());
        break;
      case 0x0f: {  // def_cfa_expression
        uint64_t len = s.uleb();
        row->cfa = {kValExpr, static_cast<uint32_t>(len), static_cast<int64_t>(s.pos())};
        row->has_expr = true;
        s.seek(s.pos() + len);
        break;
      }
      case 0x10:    // expression
      case 0x16: {  // val_expression
        reg = s.uleb();
        uint64_t len = s.uleb();
        if (reg_ok(reg)) {
          row->regs[reg] = {op == 0x10 ? kExpr : kValExpr, static_cast<uint32_t>(len),
                            static_cast<int64_t>(s.pos())};
          row->has_expr = true;
        }
        s.seek(s.pos() + len);
        break;
      }
      case 0x11:  // offset_extended_sf
        reg = s.uleb();
        {
          int64_t off = s.sleb() * cie.data_align;
          if (reg_ok(reg)) row->regs[reg] = {kOffset, 0, off};
        }
        break;
      case 0x12:  // def_cfa_sf
        reg = s.uleb();
        if (!reg_ok(reg)) return false;
        row->cfa = {kRegister, 0, static_cast<int64_t>(reg)};
        row->cfa_off = s.sleb() * cie.data_align;
        break;
      case 0x13:  // def_cfa_offset_sf
        row->cfa_off = s.sleb() * cie.data_align;
        break;
      case 0x14:  // val_offset
      case 0x15: {
        reg = s.uleb();
        int64_t off = op == 0x14 ? static_cast<int64_t>(s.uleb()) * cie.data_align
                                 : s.sleb() * cie.data_align;
        if (reg_ok(reg)) row->regs[reg] = {kValOffset, 0, off};
        break;
      }
      case 0x2e:  // GNU_args_size
        s.uleb();
        break;
      case 0x2f:  // GNU_negative_offset_extended
        reg = s.uleb();
        delta = s.uleb();
        if (reg_ok(reg))
          row->regs[reg] = {kOffset, 0, -static_cast<int64_t>(delta) * cie.data_align};
        break;
      default:
        return false;
    }
    if (!s.ok()) return false;
  }
  return s.ok();
}

// Computes the row for pc (the lookup address) in the module's tables.
// Parsed CIEs and their initial rows, per walk: a module's FDEs share a
// handful of CIEs.
struct CieCache {
  static constexpr int kSize = 2;
  uintptr_t addr[kSize];
  Cie cie[kSize];
  Row initial[kSize];
  int next;
};

CfiStatus find_row(const CfiModule& m, uintptr_t pc, Row* row, CieCache* cache) {
  uintptr_t fde = 0;
  CfiStatus st = find_fde(m, pc, &fde);
  if (st != CfiStatus::kStepped) return st;
  // One read for the whole record where it is short (the usual case).
  Stream s(fde, fde + 192);
  uint64_t len = s.fixed(4);
  if (!s.ok()) return CfiStatus::kUnreadable;
  if (len == 0 || len == 0xffffffff || len > (1u << 24)) return CfiStatus::kBadCfi;
  uintptr_t end = fde + 4 + len;
  s.set_end(end);
  uintptr_t cie_field = s.pos();
  uint32_t cie_off = static_cast<uint32_t>(s.fixed(4));
  if (!s.ok()) return CfiStatus::kUnreadable;
  if (cie_off == 0) return CfiStatus::kBadCfi;  // a CIE, not an FDE
  uintptr_t cie_addr = cie_field - cie_off;
  int slot = -1;
  for (int i = 0; i < CieCache::kSize; ++i) {
    if (cache->addr[i] == cie_addr) slot = i;
  }
  if (slot < 0) {
    slot = cache->next;
    cache->next = (cache->next + 1) % CieCache::kSize;
    cache->addr[slot] = 0;
    Cie& c = cache->cie[slot];
    if (!parse_cie(cie_addr, &c)) return CfiStatus::kBadCfi;
    cache->initial[slot] = Row{};
    if (!run_program(c.insns, c.end, c, 0, UINTPTR_MAX, nullptr, &cache->initial[slot]))
      return CfiStatus::kBadCfi;
    cache->addr[slot] = cie_addr;
  }
  const Cie& cie = cache->cie[slot];
  const Row& initial = cache->initial[slot];
  uintptr_t begin = s.encoded(cie.fde_enc);
  uintptr_t range = s.encoded(cie.fde_enc & 0x0f);
  if (!s.ok()) return CfiStatus::kUnreadable;
  if (pc < begin || pc - begin >= range) return CfiStatus::kNoFde;
  if (cie.has_z) {
    uint64_t auglen = s.uleb();
    s.seek(s.pos() + auglen);
  }
  if (!s.ok() || s.pos() > end) return CfiStatus::kBadCfi;
  *row = initial;
  if (!run_program(s.pos(), end, cie, begin, pc, &initial, row)) return CfiStatus::kBadCfi;
  row->signal = cie.signal;
  if (row->cfa.kind == kUnset) return CfiStatus::kBadCfi;
  return CfiStatus::kStepped;
}

// A DWARF expression of the kinds call-frame information uses.
bool eval_expr(uintptr_t addr, uint32_t len, const CfiRegs& regs, bool push_cfa, uintptr_t cfa,
               uintptr_t* out) {
  constexpr int kDepth = 16;
  uintptr_t st[kDepth];
  int sp = 0;
  if (push_cfa) st[sp++] = cfa;
  Stream s(addr, addr + len);
  auto reg_value = [&](uint64_t r, uintptr_t* v) {
    if (r >= kCfiNumRegs || !(regs.valid & (1u << r))) return false;
    *v = regs.r[r];
    return true;
  };
  while (!s.at_end()) {
    uint8_t op = s.u8();
    if (!s.ok()) return false;
    uintptr_t a, b;
    if (op >= 0x30 && op <= 0x4f) {  // lit0..31
      if (sp >= kDepth) return false;
      st[sp++] = op - 0x30;
      continue;
    }
    if (op >= 0x50 && op <= 0x6f) {  // reg0..31
      if (sp >= kDepth || !reg_value(op - 0x50, &a)) return false;
      st[sp++] = a;
      continue;
    }
    if (op >= 0x70 && op <= 0x8f) {  // breg0..31
      int64_t off = s.sleb();
      if (sp >= kDepth || !reg_value(op - 0x70, &a)) return false;
      st[sp++] = a + static_cast<uintptr_t>(off);
      continue;
    }
    switch (op) {
      case 0x03:  // addr
      case 0x08:
      case 0x09:
      case 0x0a:
      case 0x0b:
      case 0x0c:
      case 0x0d:
      case 0x0e:
      case 0x0f:
      case 0x10:
      case 0x11: {
        uint64_t v;
        switch (op) {
          case 0x03:
            v = s.fixed(8);
            break;
          case 0x08:
            v = s.fixed(1);
            break;
          case 0x09:
            v = static_cast<uint64_t>(static_cast<int8_t>(s.fixed(1)));
            break;
          case 0x0a:
            v = s.fixed(2);
            break;
          case 0x0b:
            v = static_cast<uint64_t>(static_cast<int16_t>(s.fixed(2)));
            break;
          case 0x0c:
            v = s.fixed(4);
            break;
          case 0x0d:
            v = static_cast<uint64_t>(static_cast<int32_t>(s.fixed(4)));
            break;
          case 0x0e:
          case 0x0f:
            v = s.fixed(8);
            break;
          case 0x10:
            v = s.uleb();
            break;
          default:
            v = static_cast<uint64_t>(s.sleb());
            break;
        }
        if (sp >= kDepth) return false;
        st[sp++] = v;
        break;
      }
      case 0x92: {  // bregx
        uint64_t r = s.uleb();
        int64_t off = s.sleb();
        if (sp >= kDepth || !reg_value(r, &a)) return false;
        st[sp++] = a + static_cast<uintptr_t>(off);
        break;
      }
      case 0x06:  // deref
        if (sp < 1 || !safe_read_obj(&a, st[sp - 1])) return false;
        st[sp - 1] = a;
        break;
      case 0x12:  // dup
        if (sp < 1 || sp >= kDepth) return false;
        st[sp] = st[sp - 1];
        ++sp;
        break;
      case 0x13:  // drop
        if (sp < 1) return false;
        --sp;
        break;
      case 0x14:  // over
        if (sp < 2 || sp >= kDepth) return false;
        st[sp] = st[sp - 2];
        ++sp;
        break;
      case 0x16:  // swap
        if (sp < 2) return false;
        a = st[sp - 1];
        st[sp - 1] = st[sp - 2];
        st[sp - 2] = a;
        break;
      case 0x23:  // plus_uconst
        if (sp < 1) return false;
        st[sp - 1] += s.uleb();
        break;
      case 0x96:
        break;  // nop
      default: {
        if (sp < 2) return false;
        b = st[--sp];
        a = st[sp - 1];
        uintptr_t r;
        switch (op) {
          case 0x1a:
            r = a & b;
            break;
          case 0x1c:
            r = a - b;
            break;
          case 0x21:
            r = a | b;
            break;
          case 0x22:
            r = a + b;
            break;
          case 0x24:
            r = b >= 64 ? 0 : a << b;
            break;
          case 0x25:
            r = b >= 64 ? 0 : a >> b;
            break;
          case 0x26:
            r = static_cast<uintptr_t>(static_cast<int64_t>(a) >> (b >= 64 ? 63 : b));
            break;
          case 0x27:
            r = a ^ b;
            break;
          case 0x29:
            r = a == b;
            break;
          case 0x2a:
            r = static_cast<int64_t>(a) >= static_cast<int64_t>(b);
            break;
          case 0x2b:
            r = static_cast<int64_t>(a) > static_cast<int64_t>(b);
            break;
          case 0x2c:
            r = static_cast<int64_t>(a) <= static_cast<int64_t>(b);
            break;
          case 0x2d:
            r = static_cast<int64_t>(a) < static_cast<int64_t>(b);
            break;
          case 0x2e:
            r = a != b;
            break;
          default:
            return false;  // anything else: leave it to the fallback
        }
        st[sp - 1] = r;
        break;
      }
    }
    if (!s.ok()) return false;
  }
  if (sp < 1) return false;
  *out = st[sp - 1];
  return true;
}

// The rt_sigreturn trampoline: mov $15,%rax; syscall. The interrupted
// context's ucontext is at sp.
bool is_sigreturn(uintptr_t pc) {
  static const uint8_t kCode[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  uint8_t code[9];
  if (!safe_read(code, pc, sizeof code)) return false;
  for (size_t i = 0; i < sizeof code; ++i) {
    if (code[i] != kCode[i]) return false;
  }
  return true;
}

CfiStatus step_sigreturn(CfiRegs* regs, bool* exact) {
  uintptr_t gregs = regs->r[kCfiRsp] + offsetof(ucontext_t, uc_mcontext.gregs);
  greg_t g[NGREG];
  if (!safe_read(g, gregs, sizeof g)) return CfiStatus::kUnreadable;
  for (int i = 0; i < kCfiNumRegs; ++i) regs->r[i] = static_cast<uintptr_t>(g[kGregOf[i]]);
  regs->valid = (1u << kCfiNumRegs) - 1;
  *exact = true;
  return CfiStatus::kStepped;
}

CfiStatus apply_row(const Row& row, CfiRegs* regs, StackWindow* stack, bool* exact) {
  uintptr_t cfa;
  if (row.cfa.kind == kRegister) {
    int r = static_cast<int>(row.cfa.value);
    if (!(regs->valid & (1u << r))) return CfiStatus::kBadCfi;
    cfa = regs->r[r] + static_cast<uintptr_t>(row.cfa_off);
  } else if (!eval_expr(static_cast<uintptr_t>(row.cfa.value), row.cfa.len, *regs, false, 0,
                        &cfa)) {
    return CfiStatus::kBadCfi;
  }
  CfiRegs next;
  next.valid = 0;
  for (int i = 0; i < kCfiNumRegs; ++i) {
    const Rule& rule = row.regs[i];
    uintptr_t v = 0, addr = 0;
    bool ok = true;
    switch (rule.kind) {
      case kUnset:
      case kSame:
        if (i == kCfiRip) {
          ok = false;  // a return address must have a rule
        } else {
          v = regs->r[i];
          ok = regs->valid & (1u << i);
        }
        break;
      case kUndefined:
        ok = false;
        break;
      case kOffset:
        ok = stack->read(cfa + static_cast<uintptr_t>(rule.value), &v);
        break;
      case kValOffset:
        v = cfa + static_cast<uintptr_t>(rule.value);
        break;
      case kRegister:
        v = regs->r[rule.value];
        ok = regs->valid & (1u << rule.value);
        break;
      case kExpr:
        ok = eval_expr(static_cast<uintptr_t>(rule.value), rule.len, *regs, true, cfa, &addr) &&
             safe_read_obj(&v, addr);
        break;
      case kValExpr:
        ok = eval_expr(static_cast<uintptr_t>(rule.value), rule.len, *regs, true, cfa, &v);
        break;
    }
    if (ok) {
      next.r[i] = v;
      next.valid |= 1u << i;
    } else {
      next.r[i] = 0;
      if (i == kCfiRip && (rule.kind == kOffset || rule.kind == kExpr))
        return CfiStatus::kUnreadable;
    }
  }
  if (row.regs[kCfiRsp].kind == kUnset) {
    next.r[kCfiRsp] = cfa;  // the CFA is the caller's stack pointer
    next.valid |= 1u << kCfiRsp;
  }
  if (!(next.valid & (1u << kCfiRip)) || next.r[kCfiRip] == 0) {
    *regs = next;
    return CfiStatus::kEnd;
  }
  *regs = next;
  *exact = row.signal;
  return CfiStatus::kStepped;
}

struct WalkState {
  StackWindow stack;
  CieCache cies;
};

CfiStatus step(const CfiModules& mods, CfiRegs* regs, bool* exact, WalkState* w) {
  if (!(regs->valid & (1u << kCfiRip))) return CfiStatus::kEnd;
  uintptr_t pc = regs->r[kCfiRip];
  uintptr_t lookup = *exact ? pc : pc - 1;
  Row row;
  if (cache_get(lookup, &row)) return apply_row(row, regs, &w->stack, exact);
  int m = cfi_find_module(mods, lookup);
  CfiStatus st = CfiStatus::kNoModule;
  if (m >= 0) {
    st = mods.items[m].eh_frame_hdr ? find_row(mods.items[m], lookup, &row, &w->cies)
                                    : CfiStatus::kNoTable;
  }
  if (st != CfiStatus::kStepped) {
    // A signal trampoline without (usable) tables.
    if (is_sigreturn(pc)) return step_sigreturn(regs, exact);
    return st;
  }
  if (!row.has_expr) cache_put(lookup, row);
  return apply_row(row, regs, &w->stack, exact);
}

}  // namespace

bool cfi_follows_call(uintptr_t ret) {
  // call rel32 (e8), or call through a register or memory (ff /2): 2, 3,
  // 4, 6 or 7 bytes from ff on (ModRM, SIB, displacement; a REX prefix comes
  // before it): b[k] is the byte at ret-7+k.
  uint8_t b[7];
  if (ret < sizeof b || !safe_read(b, ret - sizeof b, sizeof b)) return false;
  if (b[2] == 0xe8) return true;
  static const int kFf[] = {5, 4, 3, 1, 0};  // ff at ret-2, -3, -4, -6, -7
  for (int at : kFf) {
    if (b[at] == 0xff && (b[at + 1] & 0x38) == 0x10) return true;
  }
  return false;
}

const char* cfi_status_name(CfiStatus s) {
  switch (s) {
    case CfiStatus::kStepped:
      return "stepped";
    case CfiStatus::kEnd:
      return "end of stack";
    case CfiStatus::kNoModule:
      return "pc is in no module";
    case CfiStatus::kNoTable:
      return "module has no usable .eh_frame_hdr";
    case CfiStatus::kNoFde:
      return "no FDE covers pc";
    case CfiStatus::kBadCfi:
      return "unsupported or malformed call-frame information";
    case CfiStatus::kUnreadable:
      return "unwind table or stack not readable";
  }
  return "?";
}

void cfi_regs_from_ucontext(const ucontext_t* uc, CfiRegs* regs) {
  for (int i = 0; i < kCfiNumRegs; ++i)
    regs->r[i] = static_cast<uintptr_t>(uc->uc_mcontext.gregs[kGregOf[i]]);
  regs->valid = (1u << kCfiNumRegs) - 1;
}

void cfi_regs_to_ucontext(const CfiRegs& regs, ucontext_t* uc) {
  for (int i = 0; i < kCfiNumRegs; ++i) {
    uc->uc_mcontext.gregs[kGregOf[i]] = static_cast<greg_t>(regs.valid & (1u << i) ? regs.r[i] : 0);
  }
}

int cfi_find_module(const CfiModules& mods, uintptr_t pc) {
  int lo = 0, hi = mods.count;  // first module with lo > pc
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (mods.items[mid].lo <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return -1;
  const CfiModule& m = mods.items[lo - 1];
  return pc < m.hi ? lo - 1 : -1;
}

CfiStatus cfi_lookup(const CfiModules& mods, uintptr_t pc) {
  int m = cfi_find_module(mods, pc);
  if (m < 0) return CfiStatus::kNoModule;
  if (!mods.items[m].eh_frame_hdr) return CfiStatus::kNoTable;
  Row row;
  CieCache cies = {};
  return find_row(mods.items[m], pc, &row, &cies);
}

CfiStatus cfi_step(const CfiModules& mods, CfiRegs* regs, bool* exact) {
  WalkState w{};
  return step(mods, regs, exact, &w);
}

void cfi_new_generation() {
  __atomic_fetch_add(&g_generation, 1, __ATOMIC_RELEASE);
}

int cfi_walk(const CfiModules& mods, const CfiRegs& start, bool exact, CfiEmit emit, void* ctx,
             int max_total, CfiStatus* status, CfiRegs* last) {
  WalkState w{};
  CfiRegs regs = start;
  int total = 0;
  CfiStatus st = CfiStatus::kEnd;
  while (total < max_total) {
    if (!(regs.valid & (1u << kCfiRip)) || (regs.r[kCfiRip] == 0 && total > 0)) {
      st = CfiStatus::kEnd;
      break;
    }
    emit(ctx, regs.r[kCfiRip], regs.r[kCfiRsp], exact);
    ++total;
    *last = regs;
    uintptr_t old_pc = regs.r[kCfiRip], old_sp = regs.r[kCfiRsp];
    st = step(mods, &regs, &exact, &w);
    if (st == CfiStatus::kStepped && total == 1) {
      // nothing special: the first frame had tables
    } else if (st != CfiStatus::kStepped && total == 1 && st != CfiStatus::kEnd &&
               st != CfiStatus::kUnreadable) {
      // The first pc has no unwind information: a call through a bad
      // pointer (null, garbage, freed JIT code) or a function without
      // tables, stopped at its first instruction. The return address is on
      // top of the stack. Only if it looks like one (in a module, after a
      // call): a function without tables stopped past its prologue has a
      // saved register there, and the fallback unwinder does better.
      uintptr_t ret = 0;
      if (!(regs.valid & (1u << kCfiRsp)) || !w.stack.read(regs.r[kCfiRsp], &ret)) break;
      if (cfi_find_module(mods, ret - 1) < 0 || !cfi_follows_call(ret)) break;
      regs.r[kCfiRip] = ret;
      regs.r[kCfiRsp] += 8;
      exact = false;
      st = CfiStatus::kStepped;
    }
    if (st != CfiStatus::kStepped) break;
    if (regs.r[kCfiRip] == old_pc && regs.r[kCfiRsp] == old_sp) {
      st = CfiStatus::kBadCfi;  // no progress: a loop
      break;
    }
  }
  *status = st;
  return total;
}

}  // namespace faultline::core
