// The own CFI unwinder against libunwind, step for step, on stacks of
// several shapes (built with and without frame pointers), through a signal
// trampoline, and from a call through a bad function pointer. Also the
// module snapshot against the crash-time link-map walk.
#define UNW_LOCAL_ONLY
#include "core/unwind/cfi/engine.h"

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <libunwind.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/base/arena.h"
#include "core/base/safe_read.h"
#include "core/modules/module_snapshot.h"
#include "core/modules/modules.h"
#include "core/unwind/cfi/table.h"
#include "install/module_snapshot_refresh.h"

using namespace faultline::core;

namespace {

constexpr int kMax = 128;

struct Walk {
  uintptr_t pc[kMax];
  uintptr_t sp[kMax];
  int n;
};

Arena g_arena;
ModuleTable g_table;
CfiModules g_cfi;

void setup_modules() {
  safe_read_init();
  modules_init();
  if (!g_arena.capacity()) REQUIRE(g_arena.init(4u << 20));
  g_arena.reset();
  g_table.capacity = 1024;
  g_table.items = g_arena.alloc_array<Module>(1024);
  module_snapshot_refresh();
  REQUIRE(module_snapshot_use(&g_table, &g_cfi, &g_arena));
  REQUIRE(g_cfi.count > 3);
  cfi_new_generation();
}

void walk_libunwind(unw_context_t* ctx, bool signal_frame, Walk* w) {
  unw_cursor_t c;
  w->n = 0;
  REQUIRE(unw_init_local2(&c, ctx, signal_frame ? UNW_INIT_SIGNAL_FRAME : 0) == 0);
  do {
    unw_word_t ip, sp;
    unw_get_reg(&c, UNW_REG_IP, &ip);
    unw_get_reg(&c, UNW_REG_SP, &sp);
    if (ip == 0) break;
    w->pc[w->n] = ip;
    w->sp[w->n] = sp;
    ++w->n;
  } while (w->n < kMax && unw_step(&c) > 0);
}

void walk_cfi(const ucontext_t* uc, bool exact, Walk* w, CfiStatus* status) {
  CfiRegs regs, last;
  cfi_regs_from_ucontext(uc, &regs);
  w->n = 0;
  auto emit = [](void* ctx, uintptr_t pc, uintptr_t sp, bool) {
    Walk* out = static_cast<Walk*>(ctx);
    out->pc[out->n] = pc;
    out->sp[out->n] = sp;
    ++out->n;
  };
  int n = cfi_walk(g_cfi, regs, exact, emit, w, kMax, status, &last);
  CHECK(n == w->n);
}

void check_same(const Walk& a, const Walk& b) {
  CHECK(a.n == b.n);
  for (int i = 0; i < a.n && i < b.n; ++i) {
    INFO("frame ", i);
    CHECK(a.pc[i] == b.pc[i]);
    CHECK(a.sp[i] == b.sp[i]);
  }
}

// ---- stacks of several shapes ------------------------------------------------

volatile int g_sink;
Walk g_lu, g_cfi_walk;
CfiStatus g_status;

__attribute__((noinline)) void compare_here() {
  unw_context_t ctx;
  unw_getcontext(&ctx);
  walk_libunwind(&ctx, false, &g_lu);
  walk_cfi(reinterpret_cast<ucontext_t*>(&ctx), false, &g_cfi_walk, &g_status);
}

__attribute__((noinline)) int with_alloca(int n) {
  char* p = static_cast<char*>(__builtin_alloca(static_cast<size_t>(n) * 16 + 8));
  p[0] = static_cast<char>(n);
  compare_here();
  return p[0] + g_sink;
}

__attribute__((noinline)) int many_saved(int a, int b, int c, int d) {
  // Keeps values alive across the call: callee-saved registers are pushed.
  int x = a * 3, y = b * 5, z = c * 7, w = d * 11, v = a ^ d, u = b ^ c;
  g_sink = with_alloca(a & 7);
  return x + y + z + w + v + u + g_sink;
}

__attribute__((noinline)) int recurse(int depth) {
  volatile char pad[40];
  pad[0] = static_cast<char>(depth);
  if (depth == 0) return many_saved(1, 2, 3, 4) + pad[0];
  return recurse(depth - 1) + pad[0];
}

// ---- a signal handler's stack --------------------------------------------------

void on_usr1(int, siginfo_t*, void*) {
  compare_here();
}

__attribute__((noinline)) void raise_usr1(int depth) {
  volatile int pad = depth;
  if (depth > 0) {
    raise_usr1(depth - 1);
  } else {
    raise(SIGUSR1);
  }
  g_sink = pad;
}

// ---- a call through a bad function pointer ----------------------------------------

sigjmp_buf g_jump;
uintptr_t g_ret_into_dispatch, g_ret_into_caller;
Walk g_fault_walk;
CfiStatus g_fault_status;

// Walks here, while the faulting frames are still on the stack.
void on_segv(int, siginfo_t*, void* ucv) {
  walk_cfi(static_cast<ucontext_t*>(ucv), true, &g_fault_walk, &g_fault_status);
  siglongjmp(g_jump, 1);
}

__attribute__((noinline)) void apply(void (*f)()) {
  g_ret_into_dispatch = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  f();
  g_sink = 1;  // not a tail call
}

__attribute__((noinline)) void dispatch(void (*f)()) {
  g_ret_into_caller = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  apply(f);
  g_sink = 2;
}

}  // namespace

TEST_CASE("cfi unwinder: same frames as libunwind on stacks of several shapes") {
  setup_modules();
  recurse(20);
  CHECK(g_status == CfiStatus::kEnd);
  CHECK(g_lu.n > 25);
  check_same(g_lu, g_cfi_walk);
  // Again, from the row cache.
  recurse(5);
  check_same(g_lu, g_cfi_walk);
}

TEST_CASE("cfi unwinder: through a signal trampoline") {
  setup_modules();
  struct sigaction sa = {}, old;
  sa.sa_sigaction = on_usr1;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR1, &sa, &old);
  raise_usr1(10);
  sigaction(SIGUSR1, &old, nullptr);
  CHECK(g_lu.n > 14);
  check_same(g_lu, g_cfi_walk);
}

TEST_CASE("cfi unwinder: a call through a bad function pointer keeps every caller") {
  setup_modules();
  struct sigaction sa = {}, old;
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, &old);
  if (sigsetjmp(g_jump, 1) == 0) dispatch(reinterpret_cast<void (*)()>(1));
  sigaction(SIGSEGV, &old, nullptr);
  const Walk& w = g_fault_walk;
  CfiStatus st = g_fault_status;
  REQUIRE(w.n >= 4);
  CHECK(w.pc[0] == 1);
  // Frame 1 is in apply, frame 2 the return address into dispatch, frame 3
  // into this test.
  CHECK(w.pc[2] == g_ret_into_dispatch);
  CHECK(w.pc[3] == g_ret_into_caller);
  CHECK(st == CfiStatus::kEnd);
}

TEST_CASE("module snapshot matches the crash-time link-map walk") {
  setup_modules();
  ModuleTable walked;
  walked.capacity = 1024;
  walked.items = g_arena.alloc_array<Module>(1024);
  CaptureErrors errors = {};
  REQUIRE(collect_modules(&walked, &g_arena, &errors, false));
  REQUIRE(walked.count == g_table.count);
  for (int i = 0; i < walked.count; ++i) {
    INFO(walked.items[i].path);
    CHECK(strcmp(walked.items[i].path, g_table.items[i].path) == 0);
    CHECK(walked.items[i].base == g_table.items[i].base);
    CHECK(walked.items[i].end == g_table.items[i].end);
    CHECK(walked.items[i].bias == g_table.items[i].bias);
    CHECK(walked.items[i].is_main == g_table.items[i].is_main);
    CHECK(walked.items[i].is_vdso == g_table.items[i].is_vdso);
    CHECK(walked.items[i].build_id_len == g_table.items[i].build_id_len);
    CHECK(walked.items[i].eh_frame_hdr == g_table.items[i].eh_frame_hdr);
    CHECK(memcmp(walked.items[i].build_id, g_table.items[i].build_id, 32) == 0);
  }
  // The unwinder's list built at crash time agrees with the snapshot's.
  CfiModules from_table;
  REQUIRE(cfi_modules_from_table(walked, &from_table, &g_arena));
  REQUIRE(from_table.count == g_cfi.count);
  for (int i = 0; i < g_cfi.count; ++i) {
    CHECK(from_table.items[i].lo == g_cfi.items[i].lo);
    CHECK(from_table.items[i].hi == g_cfi.items[i].hi);
    CHECK(from_table.items[i].eh_frame_hdr == g_cfi.items[i].eh_frame_hdr);
  }
  CHECK(module_snapshot_count() == walked.count);
}

TEST_CASE("crash-time walk with a stale snapshot: known modules copied, new ones read") {
  setup_modules();
  void* h = dlopen("libutil.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  ModuleTable fresh, reused;
  fresh.capacity = reused.capacity = 1024;
  fresh.items = g_arena.alloc_array<Module>(1024);
  reused.items = g_arena.alloc_array<Module>(1024);
  CaptureErrors errors = {};
  REQUIRE(collect_modules(&fresh, &g_arena, &errors, false));
  REQUIRE(collect_modules(&reused, &g_arena, &errors, true));
  REQUIRE(fresh.count == g_table.count + 1);
  REQUIRE(reused.count == fresh.count);
  for (int i = 0; i < fresh.count; ++i) {
    INFO(fresh.items[i].path);
    CHECK(strcmp(fresh.items[i].path, reused.items[i].path) == 0);
    CHECK(fresh.items[i].base == reused.items[i].base);
    CHECK(fresh.items[i].end == reused.items[i].end);
    CHECK(fresh.items[i].eh_frame_hdr == reused.items[i].eh_frame_hdr);
    CHECK(memcmp(fresh.items[i].build_id, reused.items[i].build_id, 32) == 0);
  }
  dlclose(h);
}

TEST_CASE("module snapshot: a module loaded since is noticed") {
  setup_modules();
  void* h = dlopen("libutil.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  ModuleTable t = g_table;
  CfiModules c;
  CHECK_FALSE(module_snapshot_use(&t, &c, &g_arena));
  module_snapshot_refresh();
  CHECK(module_snapshot_use(&t, &c, &g_arena));
  dlclose(h);
  module_snapshot_refresh();
  CHECK(module_snapshot_use(&t, &c, &g_arena));
}

TEST_CASE("cfi unwinder: a return address follows a call of every length") {
  safe_read_init();
  struct Case {
    unsigned char code[8];
    int len;
    bool call;
  };
  const Case cases[] = {
      {{0xe8, 1, 2, 3, 4}, 5, true},              // call rel32
      {{0xff, 0xd0}, 2, true},                    // call *%rax
      {{0x41, 0xff, 0xd3}, 3, true},              // call *%r11
      {{0xff, 0x50, 0x18}, 3, true},              // call *0x18(%rax)
      {{0x41, 0xff, 0x54, 0x24, 0x18}, 5, true},  // call *0x18(%r12)
      {{0xff, 0x54, 0x24, 0x08}, 4, true},        // call *0x8(%rsp)
      {{0xff, 0x15, 1, 2, 3, 4}, 6, true},        // call *disp32(%rip)
      {{0xff, 0x94, 0x24, 1, 2, 3, 4}, 7, true},  // call *disp32(%rsp)
      {{0x48, 0x89, 0xe5}, 3, false},             // mov %rsp,%rbp
      {{0xff, 0xe0}, 2, false},                   // jmp *%rax
      {{0x90, 0x90, 0x90, 0x90}, 4, false},       // nops
  };
  for (const Case& c : cases) {
    unsigned char buf[16];
    memset(buf, 0x90, sizeof buf);
    memcpy(buf + 8 - c.len, c.code, static_cast<size_t>(c.len));
    CAPTURE(c.len);
    CHECK(cfi_follows_call(reinterpret_cast<uintptr_t>(buf + 8)) == c.call);
  }
}

// The row cache (unwind/cfi/table.cpp): a pool handed out in order and an index
// over it. Rows come back for their key within a generation only, keys
// whose homes collide are all found, a full pool keeps what it has, and a
// new generation starts the pool again.
TEST_CASE("row cache: keys, collisions, a full pool, generations") {
  using cfi::Row;
  auto row_for = [](uintptr_t key) {
    Row r = {};
    r.cfa_off = static_cast<int64_t>(key * 7 + 1);
    return r;
  };
  cfi_new_generation();
  Row out;
  CHECK_FALSE(cfi::row_cache_get(0x1000, &out));
  cfi::row_cache_put(0x1000, row_for(0x1000));
  REQUIRE(cfi::row_cache_get(0x1000, &out));
  CHECK(out.cfa_off == row_for(0x1000).cfa_off);
  CHECK_FALSE(cfi::row_cache_get(0x1001, &out));
  // A few thousand keys: more than the pool holds. Every key the cache
  // says it has comes back with its own row, and the first ones put are
  // all there (up to the probe limit, keys are not dropped for others).
  int found = 0, first_found = 0;
  for (uintptr_t k = 1; k <= 3000; ++k) cfi::row_cache_put(k * 16, row_for(k * 16));
  for (uintptr_t k = 1; k <= 3000; ++k) {
    if (cfi::row_cache_get(k * 16, &out)) {
      CHECK(out.cfa_off == row_for(k * 16).cfa_off);
      ++found;
      if (k < 2048) ++first_found;  // the pool holds 2048, one of them 0x1000's
    }
  }
  CHECK(first_found >= 2000);  // a hashed table kept ~60%: later keys evicted them
  CHECK(found <= 2048);        // the pool is full past 2048 entries
  // A new generation: nothing of the old one, and room again.
  cfi_new_generation();
  CHECK_FALSE(cfi::row_cache_get(0x1000, &out));
  CHECK_FALSE(cfi::row_cache_get(16, &out));
  cfi::row_cache_put(16, row_for(99));
  REQUIRE(cfi::row_cache_get(16, &out));
  CHECK(out.cfa_off == row_for(99).cfa_off);
  // Many captures of the same rows, put in a different order each time
  // (live dumps of a long-running process): every generation keeps them
  // all. Index slots left by earlier generations once piled up until rows
  // were dropped (300 kept at first, 104 after 100 generations).
  // Scattered keys (evenly spaced ones never share a home).
  uintptr_t keys[300];
  uint64_t x = 12345;
  for (uintptr_t& k : keys) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    k = 0x400000 + (x >> 20) * 16;
  }
  for (int g = 0; g < 100; ++g) {
    cfi_new_generation();
    for (int i = 0; i < 300; ++i) {
      uintptr_t key = keys[(i * 7 + g * 13) % 300];
      if (!cfi::row_cache_get(key, &out)) cfi::row_cache_put(key, row_for(key));
    }
    int kept = 0;
    for (uintptr_t key : keys) {
      if (cfi::row_cache_get(key, &out) && out.cfa_off == row_for(key).cfa_off) ++kept;
    }
    INFO("generation ", g);
    REQUIRE(kept >= 295);
  }
  cfi_new_generation();
}
