// What the application recorded in another process (see remote_annotations.h).
#include "cli/remote_annotations.h"

#include <elf.h>
#include <fmt/format.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include <algorithm>
#include <cstring>

#include "core/base/safe_read.h"
#include "core/capture/annotation_tables.h"
#include "core/modules/elf_lookup.h"
#include "core/write/json_writer.h"
#include "core/write/report_threads.h"

namespace faultline::cli {

namespace {

using nlohmann::json;

constexpr char kSymbol[] = "faultline_remote_tables";

// A stopped thread's thread pointer, which keys its thread annotations with
// its id (0: not read).
uintptr_t remote_thread_pointer(pid_t tid) {
#if defined(__x86_64__)
  user_regs_struct r{};
  struct iovec io = {&r, sizeof r};
  if (ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, &io) != 0 || io.iov_len != sizeof r) return 0;
  return r.fs_base;
#elif defined(__aarch64__)
  uint64_t tp = 0;
  struct iovec io = {&tp, sizeof tp};
  if (ptrace(PTRACE_GETREGSET, tid, NT_ARM_TLS, &io) != 0) return 0;
  return tp;
#else
  return 0;
#endif
}

// `write` run on the crash path's JSON writer inside an object, parsed: the
// same text a report written in the process would hold (invalid UTF-8
// replaced, "_hex" companions). null if it does not fit.
template <typename Write>
json written(Write&& write) {
  std::vector<char> buf(size_t{4} << 20);
  core::FdSink sink(-1, buf.data(), buf.size());  // never flushed: all in buf
  core::JsonWriter w(&sink);
  w.begin_object();
  write(w);
  w.end_object();
  if (sink.bytes() > buf.size()) return nullptr;
  return json::parse(buf.data(), buf.data() + sink.bytes(), nullptr, false);
}

// Copies n objects of the target at addr into out; false if unreadable.
template <typename T>
bool copy_out(std::vector<T>* out, const void* addr, size_t n) {
  out->assign(n, T{});
  return n == 0 || core::safe_read(out->data(), reinterpret_cast<uintptr_t>(addr), n * sizeof(T));
}

template <typename T>
bool copy_one(T* out, const void* addr) {
  return core::safe_read_obj(out, reinterpret_cast<uintptr_t>(addr));
}

// The descriptor of the first module named libfaultline that exports one;
// *why says what is wrong with one that is not usable.
bool find_tables(const core::ModuleTable& modules, core::RemoteTables* t, std::string* why) {
  bool library = false;
  for (int i = 0; i < modules.count; ++i) {
    const core::Module& m = modules.items[i];
    if (m.is_vdso || !m.path || !std::strstr(m.path, "libfaultline")) continue;
    library = true;
    core::SymbolLookup lookup;
    uintptr_t at = lookup.open_image(m) ? lookup.find(kSymbol) : 0;
    lookup.close();
    if (!at) continue;
    if (!core::safe_read_obj(t, at)) {
      *why = fmt::format("{} of {} could not be read", kSymbol, m.path);
      return false;
    }
    if (!core::remote_tables_match(*t)) {
      *why = t->magic != core::kRemoteTablesMagic
                 ? fmt::format("{} of {} is not faultline's descriptor (magic {:#x})", kSymbol,
                               m.path, t->magic)
                 : fmt::format(
                       "{} of {} is version {} (this faultline reads version {}), or its table "
                       "sizes or limits differ",
                       kSymbol, m.path, t->version, core::kRemoteTablesVersion);
      return false;
    }
    return true;
  }
  if (library)
    *why = fmt::format(
        "libfaultline.so in the process exports no {} (a faultline older than this one)", kSymbol);
  return false;
}

}  // namespace

RemoteAppData read_remote_app_data(const core::ModuleTable& modules,
                                   const std::vector<pid_t>& tids) {
  RemoteAppData d;
  core::RemoteTables t{};
  if (!find_tables(modules, &t, &d.why)) return d;
  // The limits and counters first, then only the slots they say are used.
  int limit = 0, probe_limit = 0;
  uint64_t next = 0;
  std::vector<core::GlobalSlot> slots;
  std::vector<core::Crumb> crumbs;
  std::vector<core::ThreadTable> tables;
  if (!copy_one(&limit, t.annotations_limit) || !copy_one(&probe_limit, t.probe_limit) ||
      !copy_one(&next, t.crumb_next)) {
    d.why = "the annotation tables' counters could not be read";
    return d;
  }
  limit = std::clamp(limit, 0, core::kMaxAnnotations);
  probe_limit = std::clamp(probe_limit, 0, core::kMaxAnnotatedThreads);
  if (!copy_out(&slots, t.annotations, static_cast<size_t>(limit)) ||
      !copy_out(&crumbs, t.crumbs, next ? size_t{core::kMaxBreadcrumbs} : 0) ||
      !copy_out(&tables, t.thread_tables, probe_limit ? size_t{core::kMaxAnnotatedThreads} : 0)) {
    d.why = "the annotation tables could not be read";
    return d;
  }
  // The crash path's snapshots over the copies, written by its writer.
  std::vector<char> storage(size_t{1} << 20);
  std::vector<core::AnnotationView> views(core::kMaxAnnotations);
  std::vector<core::BreadcrumbView> crumb_views(core::kMaxBreadcrumbs);
  int n = core::annotation_table_snapshot(slots.data(), limit, views.data(), core::kMaxAnnotations,
                                          storage.data(), storage.size());
  json a = written([&](core::JsonWriter& w) { core::write_annotations(w, views.data(), n); });
  int nc = next ? core::breadcrumb_ring_snapshot(crumbs.data(), next, crumb_views.data(),
                                                 core::kMaxBreadcrumbs, storage.data() + (1 << 19),
                                                 storage.size() - (1 << 19))
                : 0;
  json b =
      written([&](core::JsonWriter& w) { core::write_breadcrumbs(w, crumb_views.data(), nc); });
  if (!a.is_object() || !b.is_object()) {
    d.why = "the annotations could not be written";
    return d;
  }
  d.annotations = std::move(a["annotations"]);
  d.breadcrumbs = std::move(b["breadcrumbs"]);
  for (pid_t tid : tids) {
    const core::ThreadTable* own =
        probe_limit
            ? core::thread_table_of(tables.data(), probe_limit, tid, remote_thread_pointer(tid))
            : nullptr;
    if (!own) continue;
    int nt = core::thread_table_snapshot(*own, views.data(), core::kMaxThreadAnnotations,
                                         storage.data(), storage.size());
    json ta = written([&](core::JsonWriter& w) { core::write_annotations(w, views.data(), nt); });
    if (ta.is_object()) d.thread_annotations[tid] = std::move(ta["annotations"]);
  }
  d.read = true;
  return d;
}

}  // namespace faultline::cli
