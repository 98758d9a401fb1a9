// What the application recorded in another process (see remote_annotations.h).
#include "cli/remote_annotations.h"

#include <elf.h>
#include <fmt/format.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include <algorithm>
#include <cstring>
#include <memory>

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

// The value `write` puts after its key, written by the crash path's JSON
// writer and parsed: the text a report written in the process would hold
// (invalid UTF-8 replaced, "_hex" companions).
template <typename Write>
json written(Write&& write) {
  constexpr size_t kBytes = size_t{1} << 20;  // > every table's JSON, escaped
  std::unique_ptr<char[]> buf(new char[kBytes]);
  core::FdSink sink(-1, buf.get(), kBytes);  // never flushed: all in buf
  core::JsonWriter w(&sink);
  w.begin_object();
  write(w);
  w.end_object();
  if (sink.bytes() > kBytes) return nullptr;
  json j = json::parse(buf.get(), buf.get() + sink.bytes(), nullptr, false);
  return j.is_object() && j.size() == 1 ? j.begin().value() : json();
}

json object_or_empty(json j) {
  return j.is_object() ? j : json::object();
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

RemoteTablesCopy copy_remote_tables(const core::ModuleTable& modules,
                                    const std::vector<pid_t>& tids) {
  RemoteTablesCopy c;
  core::RemoteTables t{};
  if (!find_tables(modules, &t, &c.why)) return c;
  // The limits and counters first, then only the slots they say are used.
  if (!copy_one(&c.annotations_limit, t.annotations_limit) ||
      !copy_one(&c.probe_limit, t.probe_limit) || !copy_one(&c.crumb_next, t.crumb_next)) {
    c.why = "the annotation tables' counters could not be read";
    return c;
  }
  c.annotations_limit = std::clamp(c.annotations_limit, 0, core::kMaxAnnotations);
  c.probe_limit = std::clamp(c.probe_limit, 0, core::kMaxAnnotatedThreads);
  if (!copy_out(&c.annotations, t.annotations, static_cast<size_t>(c.annotations_limit)) ||
      !copy_out(&c.crumbs, t.crumbs, c.crumb_next ? size_t{core::kMaxBreadcrumbs} : 0) ||
      !copy_out(&c.thread_tables, t.thread_tables,
                c.probe_limit ? size_t{core::kMaxAnnotatedThreads} : 0)) {
    c.why = "the annotation tables could not be read";
    return c;
  }
  for (pid_t tid : tids)
    if (c.probe_limit) c.threads.emplace_back(tid, remote_thread_pointer(tid));
  c.found = true;
  return c;
}

RemoteAppData decode_remote_tables(const RemoteTablesCopy& c) {
  RemoteAppData d;
  // The crash path's snapshots over the copies, written by its writer.
  constexpr size_t kStorage = size_t{1} << 18;  // > every table's strings
  std::unique_ptr<char[]> storage(new char[kStorage]);
  core::AnnotationView views[core::kMaxAnnotations];
  core::BreadcrumbView crumbs[core::kMaxBreadcrumbs];
  int n = core::annotation_table_snapshot(c.annotations.data(), c.annotations_limit, views,
                                          core::kMaxAnnotations, storage.get(), kStorage);
  d.annotations =
      object_or_empty(written([&](core::JsonWriter& w) { core::write_annotations(w, views, n); }));
  n = c.crumb_next ? core::breadcrumb_ring_snapshot(c.crumbs.data(), c.crumb_next, crumbs,
                                                    core::kMaxBreadcrumbs, storage.get(), kStorage)
                   : 0;
  d.breadcrumbs = written([&](core::JsonWriter& w) { core::write_breadcrumbs(w, crumbs, n); });
  if (!d.breadcrumbs.is_array()) d.breadcrumbs = json::array();
  for (const auto& [tid, self] : c.threads) {
    const core::ThreadTable* own =
        core::thread_table_of(c.thread_tables.data(), c.probe_limit, tid, self);
    if (!own) continue;
    n = core::thread_table_snapshot(*own, views, core::kMaxThreadAnnotations, storage.get(),
                                    kStorage);
    d.thread_annotations[tid] = object_or_empty(
        written([&](core::JsonWriter& w) { core::write_annotations(w, views, n); }));
  }
  return d;
}

}  // namespace faultline::cli
