#include "core/unwind/cfi/table.h"

#include "core/base/safe_read.h"
#include "core/unwind/cfi/stream.h"

namespace faultline::core::cfi {
namespace {

constexpr int kMaxRemember = 4;  // DW_CFA_remember_state depth

// ---- the row cache ----------------------------------------------------------
//
// Entries are handed out in order from a pool, and a small index maps a
// lookup address to its entry. A capture's rows then fill the pool's pages
// one after another: a Python job's first capture computes ~40 rows, which
// hashed straight into a 640 KiB table were ~26 page faults (~0.3 ms, a
// first touch of a page each, in the crashing thread's own unwind); here
// they are 3 pages of the pool and the index's. Every capture starts a new
// generation (its module list), and with it the pool and the index start
// again; an index slot whose entry holds another key or generation (a
// thread of an earlier capture still at work) is a miss to a lookup and
// free to an insert.

struct CacheEntry {
  volatile uint32_t seq;  // odd while written
  uint32_t gen;
  uintptr_t key;
  Row row;
};
constexpr uint32_t kPoolSize = 2048;
constexpr uint32_t kIndexSize = 4096;  // slots: entry number + 1, 0 if never used
constexpr uint32_t kProbes = 8;
CacheEntry g_pool[kPoolSize];
uint16_t g_index[kIndexSize];
static_assert(kPoolSize < 65536, "entry numbers fit the index's slots");
uint32_t g_pool_next;  // the next entry to hand out (past kPoolSize: full)
volatile uint32_t g_generation = 1;

uint32_t index_home(uintptr_t key) {
  return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 52) & (kIndexSize - 1);
}

// The entry's row if it holds key in generation gen (read under its seq).
bool entry_get(CacheEntry& e, uintptr_t key, uint32_t gen, Row* out) {
  uint32_t s1 = __atomic_load_n(&e.seq, __ATOMIC_ACQUIRE);
  if (s1 & 1) return false;
  if (e.gen != gen || e.key != key) return false;
  __builtin_memcpy(out, &e.row, sizeof *out);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&e.seq, __ATOMIC_RELAXED) == s1 && e.key == key && e.gen == gen;
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

bool parse_cie(uintptr_t addr, Cie* cie, Stream* rest) {
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
  *rest = s;
  return s.ok() && cie->ra == kCfiRa && cie->insns <= cie->end;
}

// Runs a call-frame program. Stops before the first advance past `target`
// (UINTPTR_MAX for a CIE's initial instructions).
// `via`: the stream that read the record, whose buffer may hold them.
bool run_program(const Stream& via, uintptr_t insns, uintptr_t end, const Cie& cie, uintptr_t loc,
                 uintptr_t target, const Row* initial, Row* row) {
  Stream s = via.at(insns, end);
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
      case 0x2d:  // AARCH64_negate_ra_state (GNU_window_save elsewhere)
        // Whether x30 is signed from here on: the unwinder strips every
        // return address (strip_return_address), signed or not.
        if (!kArchCfiRaState) return false;
        break;
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

}  // namespace

bool row_cache_get(uintptr_t key, Row* out) {
  uint32_t gen = __atomic_load_n(&g_generation, __ATOMIC_ACQUIRE);
  uint32_t home = index_home(key);
  for (uint32_t i = 0; i < kProbes; ++i) {
    uint32_t id = __atomic_load_n(&g_index[(home + i) & (kIndexSize - 1)], __ATOMIC_ACQUIRE);
    if (id == 0) return false;  // never used: the key was never put past it
    if (id <= kPoolSize && entry_get(g_pool[id - 1], key, gen, out)) return true;
  }
  return false;
}

void row_cache_put(uintptr_t key, const Row& row) {
  uint32_t gen = __atomic_load_n(&g_generation, __ATOMIC_ACQUIRE);
  uint32_t n = __atomic_fetch_add(&g_pool_next, 1, __ATOMIC_ACQ_REL);
  if (n >= kPoolSize) return;  // full until the next generation
  CacheEntry& e = g_pool[n];
  uint32_t s = __atomic_load_n(&e.seq, __ATOMIC_ACQUIRE);
  if ((s & 1) ||
      !__atomic_compare_exchange_n(&e.seq, &s, s + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    return;  // a writer of an earlier generation still has it: skip, never wait
  }
  e.key = key;
  e.gen = gen;
  __builtin_memcpy(&e.row, &row, sizeof row);
  __atomic_store_n(&e.seq, s + 2, __ATOMIC_RELEASE);
  // Into the first index slot near the key's home that is unused or whose
  // entry is of another generation or key (a stale one).
  auto id = static_cast<uint16_t>(n + 1);
  uint32_t home = index_home(key);
  for (uint32_t i = 0; i < kProbes; ++i) {
    uint16_t* slot = &g_index[(home + i) & (kIndexSize - 1)];
    uint16_t cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (cur != 0 && cur <= kPoolSize) {
      // Read without its seq: a torn read only costs a miss later (a live
      // slot taken) or a slot skipped.
      const CacheEntry& o = g_pool[cur - 1];
      if (o.gen == gen) {
        if (o.key == key) return;  // put by another thread meanwhile
        continue;                  // another key's entry of this generation
      }
    }
    if (__atomic_compare_exchange_n(slot, &cur, id, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      return;
    }
  }
}

void row_cache_new_generation() {
  // The pool starts again; entries of the old generation no longer match.
  // The index is cleared too: a slot left pointing at an entry number that
  // this generation hands out again for another key would look live to an
  // insert, and such slots would pile up around each key's home over
  // repeated captures until rows were dropped. A thread of an earlier
  // capture still inserting meanwhile only makes a miss.
  __atomic_fetch_add(&g_generation, 1, __ATOMIC_ACQ_REL);
  for (uint16_t& slot : g_index) __atomic_store_n(&slot, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_pool_next, 0, __ATOMIC_RELEASE);
}

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
    Stream rest(0, 0);
    if (!parse_cie(cie_addr, &c, &rest)) return CfiStatus::kBadCfi;
    cache->initial[slot] = Row{};
    if (!run_program(rest, c.insns, c.end, c, 0, UINTPTR_MAX, nullptr, &cache->initial[slot]))
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
  if (!run_program(s, s.pos(), end, cie, begin, pc, &initial, row)) return CfiStatus::kBadCfi;
  row->signal = cie.signal;
  if (row->cfa.kind == kUnset) return CfiStatus::kBadCfi;
  return CfiStatus::kStepped;
}

}  // namespace faultline::core::cfi
