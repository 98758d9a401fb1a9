// The module snapshot's bookkeeping: a read cut short (a siglongjmp out of
// it, as a fault or the watchdog does) must not hold back later refreshes,
// and a module's identity includes its dynamic section (dlclose(A) then
// dlopen(B) may give B A's link-map node, load address and name buffer).
#include "core/modules/module_snapshot.h"

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include <initializer_list>

#include "core/base/arena.h"
#include "core/base/safe_read.h"
#include "core/modules/module_snapshot_data.h"
#include "core/modules/modules.h"
#include "install/module_snapshot_refresh.h"

using namespace faultline::core;

namespace {

sigjmp_buf g_jump;

void jump_out(int) {
  siglongjmp(g_jump, 1);
}

struct Fixture {
  Arena arena{};
  ModuleTable table{};
  CfiModules cfi{};
  Fixture() {
    safe_read_init();
    modules_init();
    REQUIRE(arena.init(4u << 20));
    table.capacity = 1024;
    table.items = arena.alloc_array<Module>(1024);
    REQUIRE(table.items);
  }
  ~Fixture() { arena.release(); }
  bool use() {
    ModuleTable t = table;
    return module_snapshot_use(&t, &cfi, &arena);
  }
};

// Loads a library the process does not have yet (null if none is left).
void* load_new() {
  for (const char* name : {"libutil.so.1", "libz.so.1", "libanl.so.1", "libresolv.so.2"}) {
    if (void* loaded = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(loaded);
      continue;
    }
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("module snapshot: a read cut short by a fault is released when its phase ends") {
  Fixture f;
  module_snapshot_refresh();
  REQUIRE(f.use());
  // A table in memory that faults on the first write: the read is current
  // and stops inside the copy, as a fault or the watchdog's siglongjmp would.
  void* bad = mmap(nullptr, 1u << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(bad != MAP_FAILED);
  ModuleTable faulting = f.table;
  faulting.items = static_cast<Module*>(bad);
  struct sigaction sa = {}, old_segv, old_bus;
  sa.sa_handler = jump_out;
  sa.sa_flags = SA_NODEFER;
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  bool faulted = false;
  if (sigsetjmp(g_jump, 1) == 0) {
    module_snapshot_use(&faulting, &f.cfi, &f.arena);
  } else {
    faulted = true;
  }
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
  munmap(bad, 1u << 20);
  REQUIRE(faulted);
  CHECK(snapshot::reading());  // the abandoned read still holds its slot

  void* h = load_new();
  REQUIRE(h);
  module_snapshot_refresh();
  CHECK_FALSE(f.use());         // held back: the new module is not in the snapshot
  module_snapshot_end_reads();  // what the capture does when the phase ends
  CHECK_FALSE(snapshot::reading());
  module_snapshot_refresh();
  CHECK(f.use());
  dlclose(h);
  module_snapshot_refresh();
  CHECK(f.use());
}

TEST_CASE("module snapshot: another dynamic section at the same node is another module") {
  Fixture f;
  void* h = load_new();
  REQUIRE(h);
  module_snapshot_refresh();
  REQUIRE(f.use());
  link_map* lm = nullptr;
  REQUIRE(dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0);
  auto node = reinterpret_cast<uintptr_t>(lm);
  auto name = reinterpret_cast<uintptr_t>(lm->l_name);
  auto ld = reinterpret_cast<uintptr_t>(lm->l_ld);
  Module m;
  CHECK(module_snapshot_known(node, lm->l_addr, name, ld, &m, &f.arena));
  // The path is a copy in the arena, made while the snapshot was read: the
  // buffer may be rewritten by the next refresh.
  {
    const snapshot::Buffer& pb = snapshot::g_buffers[snapshot::g_published];
    auto* lo = reinterpret_cast<const char*>(&pb);
    CHECK_FALSE((m.path >= lo && m.path < lo + sizeof pb));
    CHECK(strcmp(m.path, lm->l_name) == 0);
  }
  CHECK_FALSE(module_snapshot_known(node, lm->l_addr, name, ld + 0x1000, &m, &f.arena));

  // The node as dlclose(A) + dlopen(B) could leave it: same node, address
  // and name pointer, another dynamic section.
  ElfW(Dyn)* saved = lm->l_ld;
  lm->l_ld = reinterpret_cast<ElfW(Dyn)*>(ld + 0x1000);
  CHECK_FALSE(f.use());   // crash time: the snapshot is not current
  void* h2 = load_new();  // a load, so that the refresh runs
  REQUIRE(h2);
  module_snapshot_refresh();
  // The refresh read the node again instead of reusing the old entry.
  const snapshot::Buffer& b = snapshot::g_buffers[snapshot::g_published];
  bool seen = false;
  for (int i = 0; i < b.count; ++i) {
    if (b.entries[i].node == node) {
      seen = true;
      CHECK(b.entries[i].l_ld == ld + 0x1000);
    }
  }
  CHECK(seen);
  CHECK(f.use());
  lm->l_ld = saved;
  dlclose(h2);
  dlclose(h);
  module_snapshot_refresh();
  CHECK(f.use());
}

TEST_CASE("module snapshot: the crash-time walk keeps the unwinder's index of known modules") {
  Fixture f;
  module_snapshot_refresh();
  REQUIRE(f.use());
  void* h = load_new();  // not in the snapshot: the walk reads it
  REQUIRE(h);
  ModuleTable t = f.table;
  CaptureErrors errors = {};
  REQUIRE(collect_modules(&t, &f.arena, &errors, true));
  const snapshot::Buffer& b = snapshot::g_buffers[snapshot::g_published];
  int with_index = 0, new_modules = 0;
  for (int i = 0; i < t.count; ++i) {
    const Module& m = t.items[i];
    const snapshot::Entry* e = nullptr;
    for (int k = 0; k < b.count; ++k) {
      if (b.entries[k].listed && b.entries[k].info.base == m.base) e = &b.entries[k];
    }
    if (!e) {
      ++new_modules;
      CHECK(m.cfi_index == nullptr);
      continue;
    }
    INFO(m.path);
    REQUIRE((m.cfi_index != nullptr) == (e->cfi.index != nullptr));
    if (!m.cfi_index) continue;
    ++with_index;
    CHECK(m.cfi_index != e->cfi.index);  // a copy, in the arena
    CHECK(m.cfi_index_len == e->cfi.index_len);
    CHECK(memcmp(m.cfi_index, e->cfi.index, sizeof(int32_t) * m.cfi_index_len) == 0);
    CHECK(m.cfi_table == e->cfi.table);
    CHECK(m.cfi_count == e->cfi.count);
  }
  CHECK(new_modules == 1);
  CHECK(with_index > 0);
  CfiModules cfi = {};
  REQUIRE(cfi_modules_from_table(t, &cfi, &f.arena));
  int indexed = 0;
  for (int i = 0; i < cfi.count; ++i) indexed += cfi.items[i].index != nullptr;
  CHECK(indexed == with_index);
  dlclose(h);
  module_snapshot_refresh();
}
