// faultline dump by ptrace (see ptrace_dump.h).
#include "cli/ptrace_dump.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/job_dump.h"
#include "cli/ptrace_stop.h"
#include "cli/remote_annotations.h"
#include "cli/remote_stack.h"
#include "core/base/arena.h"
#include "core/base/safe_read.h"
#include "core/capture.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/signature.h"
#include "core/modules/elf_symbols.h"
#include "core/python/interleave.h"
#include "core/python/walker.h"
#include "core/write/report_threads.h"
#include "symbolize/elf_file.h"

namespace faultline::cli {

namespace {

using nlohmann::json;

// As the library: at most this many frames a thread.
constexpr int kMaxFrames = 100;

std::string hex(uint64_t v) {
  return fmt::format("{:#x}", v);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RemoteModule {
  std::string path;
  uint64_t base = 0, end = 0, bias = 0, eh_frame_hdr = 0;
  std::string build_id;
  bool vdso = false;
};

// The name the link map gives the vDSO, as crash reports name it.
constexpr char kVdsoName[] = "linux-vdso.so.1";

// The modules of process pid, from /proc/PID/maps: each ELF file's lowest
// mapping is its base, and the vDSO; the load bias and the unwind tables
// (.eh_frame_hdr) from the loaded image's program headers, as the crash
// path reads them (through the SafeReader, pinned to pid).
std::vector<RemoteModule> read_modules(pid_t pid) {
  std::vector<RemoteModule> out;
  std::map<std::string, size_t> index;
  std::istringstream maps(read_text(fmt::format("/proc/{}/maps", pid)));
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long lo = 0, hi = 0, off = 0;
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %*s %llx %*s %*s %n", &lo, &hi, &off, &name_at) < 3 ||
        name_at <= 0)
      continue;
    std::string path = line.substr(name_at);
    bool vdso = path == "[vdso]";
    if (vdso) path = kVdsoName;
    if (path.empty() || (path[0] != '/' && !vdso) || path.find(" (deleted)") != std::string::npos)
      continue;
    auto it = index.find(path);
    if (it == index.end()) {
      if (off != 0) continue;  // not its first mapping: not an image we know
      index[path] = out.size();
      out.push_back(RemoteModule{path, lo, hi, lo, 0, "", vdso});
    } else {
      out[it->second].end = std::max<uint64_t>(out[it->second].end, hi);
    }
  }
  for (RemoteModule& m : out) {
    uintptr_t bias = 0, eh_frame_hdr = 0;
    if (remote_image(m.base, &bias, &eh_frame_hdr)) {
      m.bias = bias;
      m.eh_frame_hdr = eh_frame_hdr;
    }
    if (m.vdso) continue;
    std::string err;
    if (auto elf = symbolize::internal::ElfFile::open(m.path, &err)) m.build_id = elf->build_id();
  }
  return out;
}

std::string thread_name(pid_t pid, pid_t tid) {
  std::string name = read_text(fmt::format("/proc/{}/task/{}/comm", pid, tid));
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

// One thread's native stack, innermost first.
struct NativeStack {
  pid_t tid = 0;
  bool captured = false;
  int total = 0;
  core::Unwinder unwinder = core::Unwinder::kNone;
  std::vector<core::NativeFrame> frames;  // named by the library's symbolizer
  json registers;                         // read while it is stopped
  std::string note;                       // why there are no frames, or a late stop
};

// A stopped thread's stack, by the crash path's unwinder from the registers
// its tracer reads.
void unwind_thread(const StoppedThread& t, const core::ModuleTable& table, NativeStack* st,
                   core::CaptureErrors* errors) {
  pid_t tid = t.tid;
  st->tid = tid;
  ucontext_t uc;
  if (!remote_registers(tid, &uc, &st->registers)) {
    st->note = "its registers could not be read";
    return;
  }
#if defined(__x86_64__)
  // The result register as the thread had it, before the stop's EINTR was
  // made a restart.
  if (t.eintr_restarted) st->registers["rax"] = fmt::format("{:#x}", static_cast<uint64_t>(-EINTR));
#endif
  st->frames.resize(kMaxFrames);
  core::ThreadCapture tc{};
  tc.tid = tid;
  tc.frames = st->frames.data();
  remote_unwind(uc, table, &tc, kMaxFrames, errors);
  st->frames.resize(static_cast<size_t>(tc.nframes));
  st->total = tc.frames_total;
  st->unwinder = tc.unwinder;
  st->captured = tc.nframes > 0;
  if (!st->captured) st->note = "its stack could not be read";
}

std::string utc_now(int64_t* sec_out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  *sec_out = ts.tv_sec;
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ts.tv_nsec / 1000000));
}

json process_of(pid_t pid) {
  json p = {{"pid", pid}};
  char buf[4096];
  ssize_t n = readlink(fmt::format("/proc/{}/exe", pid).c_str(), buf, sizeof buf - 1);
  p["executable"] = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  json argv = json::array();
  std::string cmd = read_text(fmt::format("/proc/{}/cmdline", pid));
  for (size_t at = 0; at < cmd.size();) {
    size_t end = cmd.find('\0', at);
    if (end == std::string::npos) end = cmd.size();
    argv.push_back(cmd.substr(at, end - at));
    at = end + 1;
  }
  p["argv"] = std::move(argv);
  n = readlink(fmt::format("/proc/{}/cwd", pid).c_str(), buf, sizeof buf - 1);
  p["cwd"] = n > 0 ? json(std::string(buf, static_cast<size_t>(n))) : json(nullptr);
  std::istringstream status(read_text(fmt::format("/proc/{}/status", pid)));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("PPid:", 0) == 0) p["ppid"] = std::atoi(line.c_str() + 5);
    if (line.rfind("Uid:", 0) == 0) p["uid"] = std::atoi(line.c_str() + 4);
  }
  struct utsname u;
  if (uname(&u) == 0) {
    p["hostname"] = u.nodename;
    p["os"] = {{"sysname", u.sysname},
               {"release", u.release},
               {"version", u.version},
               {"machine", u.machine}};
  }
  return p;
}

// The core's module table for the same modules (the Python walker looks up
// _PyRuntime in their files and reads the target through the SafeReader).
struct CoreModules {
  std::vector<core::Module> items;
  core::ModuleTable table{};
};

uint8_t hex_digit(char c) {
  return static_cast<uint8_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
}

void to_core(const std::vector<RemoteModule>& mods, const std::string& exe, CoreModules* out) {
  out->items.resize(mods.size());
  for (size_t i = 0; i < mods.size(); ++i) {
    core::Module& m = out->items[i];
    m = core::Module{};
    m.base = mods[i].base;
    m.end = mods[i].end;
    m.bias = mods[i].bias;
    m.path = mods[i].path.c_str();
    m.is_main = mods[i].path == exe;
    m.is_vdso = mods[i].vdso;
    m.eh_frame_hdr = mods[i].eh_frame_hdr;
    size_t n = std::min(mods[i].build_id.size() / 2, sizeof m.build_id);
    for (size_t b = 0; b < n; ++b)
      m.build_id[b] = static_cast<uint8_t>(hex_digit(mods[i].build_id[2 * b]) << 4 |
                                           hex_digit(mods[i].build_id[2 * b + 1]));
    m.build_id_len = static_cast<uint8_t>(n);
  }
  out->table.items = out->items.data();
  out->table.count = static_cast<int>(out->items.size());
  out->table.capacity = out->table.count;
}

json native_frame_json(const core::NativeFrame& f, const std::vector<RemoteModule>& mods) {
  const char* path = f.module >= 0 ? mods[static_cast<size_t>(f.module)].path.c_str() : nullptr;
  json j = {{"kind", "native"},
            {"origin", core::classify_native(path, f.symbol).id},
            {"pc", hex(f.pc)},
            {"sp", hex(f.sp)}};
  if (f.signal_frame) j["signal_frame"] = true;
  if (path) {
    j["module"] = path;
    j["module_offset"] = hex(f.pc - mods[static_cast<size_t>(f.module)].bias);
  } else {
    j["module"] = nullptr;
  }
  if (f.symbol) {
    j["symbol"] = f.symbol;
    j["symbol_offset"] = hex(f.symbol_offset);
  }
  return j;
}

json python_frame_json(const core::PyFrame& f) {
  json j = {{"kind", "python"},
            {"origin", core::classify_python(f.file, f.function).id},
            {"file", f.file ? f.file : ""},
            {"line", f.line},
            {"function", f.function ? f.function : ""}};
  if (f.qualname) j["qualname"] = f.qualname;
  return j;
}

// A thread's report entry: its native frames and, where the interpreter
// runs in it, its Python frames, merged as the library merges them.
json thread_json(pid_t pid, const NativeStack& st, const core::PythonCapture& py,
                 const CoreModules& cm, const std::vector<RemoteModule>& mods) {
  json t = {{"tid", st.tid},
            {"name", thread_name(pid, st.tid)},
            {"crashed", false},
            {"captured", st.captured},
            {"unwinder", core::unwinder_name(st.unwinder)},
            {"frames_total", st.total},
            {"frames_truncated", st.total > static_cast<int>(st.frames.size())}};
  if (!st.note.empty()) t["note"] = st.note;
  const core::PyThread* pt = nullptr;
  for (int i = 0; py.present && i < py.nthreads; ++i)
    if (py.threads[i].native_tid == st.tid) pt = &py.threads[i];
  json frames = json::array();
  int merged = -1;
  std::vector<core::FrameRef> refs;
  core::ThreadCapture tc{};
  tc.tid = st.tid;
  tc.frames = const_cast<core::NativeFrame*>(st.frames.data());
  tc.nframes = static_cast<int>(st.frames.size());
  if (pt) {
    t["holds_gil"] = pt->holds_gil;
    t["python_frames_total"] = pt->frames_total;
    if (pt->error) t["python_error"] = pt->error;
    t["pthread_id"] = hex(pt->thread_id);
    t["python_thread"] = pt - py.threads;
    if (pt->nframes > 0 && tc.nframes > 0) {
      refs.resize(static_cast<size_t>(tc.nframes + pt->nframes));
      merged =
          core::interleave_frames(tc, *pt, cm.table, refs.data(), static_cast<int>(refs.size()));
    }
  }
  if (merged >= 0) {
    for (int i = 0; i < merged; ++i) {
      const core::FrameRef& r = refs[static_cast<size_t>(i)];
      frames.push_back(r.python ? python_frame_json(pt->frames[r.index])
                                : native_frame_json(st.frames[static_cast<size_t>(r.index)], mods));
    }
  } else {
    for (const core::NativeFrame& f : st.frames) frames.push_back(native_frame_json(f, mods));
    for (int i = 0; pt && i < pt->nframes; ++i) frames.push_back(python_frame_json(pt->frames[i]));
  }
  if (pt) t["interleaved"] = merged >= 0;
  t["frames"] = std::move(frames);
  if (!st.registers.is_null()) t["registers"] = st.registers;
  return t;
}

// For tests only: with FAULTLINE_TEST_DUMP_HOLD=1 in its environment the
// dump says on stderr where it is ("faultline-test: threads stopped", then
// "threads let go") and waits there for a line on stdin, so that a test acts
// on the target at a moment it knows, without timing. With
// FAULTLINE_TEST_DUMP_HOLD=seized it holds there too, and also after it
// attaches each thread, before it asks it to stop ("thread seized TID").
const char* test_hold_mode() {
  static const char* mode = [] {
    const char* v = std::getenv("FAULTLINE_TEST_DUMP_HOLD");
    if (v && std::strcmp(v, "1") == 0) return "1";
    if (v && std::strcmp(v, "seized") == 0) return "seized";
    return "";
  }();
  return mode;
}

void test_hold(const char* where) {
  if (!*test_hold_mode()) return;
  std::fprintf(stderr, "faultline-test: %s\n", where);
  std::fflush(stderr);
  char c = 0;
  while (::read(0, &c, 1) == 1 && c != '\n') {
  }
}

void test_hold_seized(pid_t tid) {
  test_hold(fmt::format("thread seized {}", tid).c_str());
}

// What the tracer thread reads of the target, for the report.
struct Captured {
  std::string when;
  int64_t capture_ns = 0;  // from the first attach to the stopped threads' release
  std::vector<RemoteModule> mods;
  CoreModules cm;
  std::vector<NativeStack> stacks;
  core::PythonCapture py{};
  core::CaptureErrors errors{};
  core::Arena arena;
  bool have_arena = false;
  RemoteTablesCopy app;  // its annotations and breadcrumbs
};

// Stops the threads, reads everything, and lets them go: run in a thread of
// its own (ThreadStopper), whose end lets go of any thread still attached.
int capture_stopped(pid_t pid, int wait_ms, Captured* c, std::string* why) {
  auto started = std::chrono::steady_clock::now();
  ThreadStopper stopper(pid);
  if (std::strcmp(test_hold_mode(), "seized") == 0) stopper.set_seized_hook(test_hold_seized);
  int err = stopper.stop_all(why);
  if (err) return err;
  test_hold("threads stopped");
  int64_t sec = 0;
  c->when = utc_now(&sec);
  // Every read of the target (program headers, unwind tables, stacks, the
  // interpreter) through the SafeReader pinned to it.
  core::safe_read_remote(pid);
  c->mods = read_modules(pid);
  char exe[4096];
  ssize_t n = readlink(fmt::format("/proc/{}/exe", pid).c_str(), exe, sizeof exe - 1);
  to_core(c->mods, std::string(exe, n > 0 ? static_cast<size_t>(n) : 0), &c->cm);
  c->have_arena = c->arena.init(size_t{64} << 20);
  if (!c->have_arena || !remote_unwind_modules(c->cm.table, &c->arena))
    c->errors.add("unwind: no memory for the module list; frame-pointer chains only");
  // Native stacks: the crash path's unwinder, from each thread's registers.
  std::vector<NativeStack>& stacks = c->stacks;
  for (const StoppedThread& t : stopper.threads()) {
    if (t.done || t.tid <= 0) continue;  // exited meanwhile
    stacks.emplace_back();
    stacks.back().tid = t.tid;
    if (t.stopped) unwind_thread(t, c->cm.table, &stacks.back(), &c->errors);
  }
  // Python stacks: the library's own walker.
  if (c->have_arena)
    core::capture_python(c->cm.table, &c->arena, &c->py, core::kMaxThreads, kMaxFrames, &c->errors);
  else
    c->errors.add("python: no memory for the walk");
  // What the application recorded, as its crash report would hold it.
  std::vector<pid_t> tids;
  for (const StoppedThread& t : stopper.threads())
    if (t.stopped && !t.done && t.tid > 0) tids.push_back(t.tid);
  c->app = copy_remote_tables(c->cm.table, tids);
  // Everything is read: the stopped threads go on.
  stopper.let_stopped_go();
  c->capture_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  // A thread that had not stopped (a wait in the kernel) is captured alone
  // when it stops, and let go at once.
  while (StoppedThread* t = stopper.wait_late(wait_ms)) {
    for (NativeStack& st : stacks) {
      if (st.tid != t->tid) continue;
      unwind_thread(*t, c->cm.table, &st, &c->errors);
      st.note =
          "stopped for the dump only after the others had been let go (a wait in the "
          "kernel): captured alone, later";
    }
    stopper.let_go(t);
  }
  // One that exited meanwhile is not listed.
  stacks.erase(std::remove_if(stacks.begin(), stacks.end(),
                              [](const NativeStack& st) {
                                return st.registers.is_null() && ::kill(st.tid, 0) != 0;
                              }),
               stacks.end());
  for (NativeStack& st : stacks) {
    if (!st.captured && st.note.empty() && st.registers.is_null())
      st.note = fmt::format(
          "did not stop for the dump within {:g} s (in vfork, or an uninterruptible wait in the "
          "kernel); never stopped",
          wait_ms / 1000.0);
  }
  return 0;
}

}  // namespace

int ptrace_capture(pid_t pid, json* report, std::string* why, int wait_ms) {
  // The tracer is a thread of its own: when it ends, the kernel lets go of
  // every thread it still has attached (one that never stopped) and cancels
  // its pending stop, so no thread of the job stops after the capture. The
  // signals that end this process come to it (the others block them), so
  // that its handler can detach what it stopped.
  Captured c;
  int err = 0;
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM}) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  std::thread tracer([&] {
    // Unblocked even where this process started with them blocked (the
    // library's timed-dump watchdog, which blocks every signal, starts it
    // as its helper): the stop deadline is a SIGALRM.
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    pthread_sigmask(SIG_UNBLOCK, &block, nullptr);
    err = capture_stopped(pid, wait_ms, &c, why);
  });
  tracer.join();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err) return err;
  test_hold("threads let go");
  std::vector<RemoteModule>& mods = c.mods;
  CoreModules& cm = c.cm;
  std::vector<NativeStack>& stacks = c.stacks;
  core::PythonCapture& py = c.py;
  core::CaptureErrors& errors = c.errors;
  core::Arena& arena = c.arena;
  bool have_arena = c.have_arena;
  const std::string& when = c.when;
  int64_t capture_ns = c.capture_ns;
  // Symbols: the library's ELF symbolizer, one pass over each module's
  // tables for all the frames in it.
  std::vector<core::ThreadCapture> tcs(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i) {
    tcs[i].tid = stacks[i].tid;
    tcs[i].frames = stacks[i].frames.data();
    tcs[i].nframes = static_cast<int>(stacks[i].frames.size());
  }
  if (have_arena)
    core::symbolize_threads(cm.table, tcs.data(), static_cast<int>(tcs.size()), &arena, &errors);
  RemoteAppData app;
  if (c.app.found) app = decode_remote_tables(c.app);
  json threads = json::array();
  for (const NativeStack& st : stacks) {
    threads.push_back(thread_json(pid, st, py, cm, mods));
    auto own = app.thread_annotations.find(st.tid);
    if (own != app.thread_annotations.end()) threads.back()["annotations"] = own->second;
  }
  // The main thread first, as the library lists them.
  std::stable_sort(threads.begin(), threads.end(), [pid](const json& a, const json& b) {
    return a["tid"] == pid && b["tid"] != pid;
  });
  char signature[32] = {};
  core::dump_signature(signature);
  json modules = json::array();
  for (const RemoteModule& m : mods) {
    modules.push_back({{"path", m.path},
                       {"base", hex(m.base)},
                       {"size", hex(m.end - m.base)},
                       {"load_bias", hex(m.bias)},
                       {"build_id", m.build_id}});
  }
  json python = nullptr;
  if (py.present) {
    python = {{"version", py.version},
              {"implementation", "cpython"},
              {"runtime", hex(py.runtime)},
              {"runtime_found", "crash"},
              {"threads_total", py.threads_total}};
  }
  json errs = json::array();
  for (int i = 0; i < errors.count; ++i) errs.push_back(errors.items[i]);
  if (!c.app.why.empty())
    errs.push_back("annotations: " + c.app.why + "; annotations and breadcrumbs left out");
  arena.release();
  size_t nthreads = threads.size();
  *report = json{
      {"schema", "faultline/1"},
      {"kind", "dump"},
      {"capture", "ptrace"},
      {"timestamp", when},
      {"signal",
       {{"number", SIGSTOP},
        {"name", "SIGSTOP"},
        {"code", 0},
        {"code_name", "PTRACE_INTERRUPT"},
        {"description", "stopped by `faultline dump` with PTRACE_INTERRUPT: no signal was sent"},
        {"fault_address", nullptr}}},
      {"diagnosis",
       {{"summary", fmt::format("live dump (ptrace) of {} threads", nthreads)},
        {"category", "dump"},
        {"signature", signature}}},
      {"process", process_of(pid)},
      {"python", std::move(python)},
      {"crashed_tid", nullptr},
      {"dumping_tid", nullptr},
      {"other_crashes", json::array()},
      {"threads_total", nthreads},
      {"threads_cut", 0},
      {"threads", std::move(threads)},
      {"modules", std::move(modules)},
      {"minidump", nullptr},
      {"faultline",
       {{"version", FAULTLINE_VERSION},
        {"capture_ns", capture_ns},
        {"safe_read", "process_vm_readv"},
        {"modules_from", "/proc/PID/maps"},
        {"errors", std::move(errs)}}}};
  // Left out where they could not be read (faultline.errors says why);
  // empty where the process has no faultline.
  if (c.app.why.empty()) {
    (*report)["annotations"] = c.app.found ? app.annotations : json::object();
    (*report)["breadcrumbs"] = c.app.found ? app.breadcrumbs : json::array();
  }
  if (json job = job_of(pid); !job.is_null()) (*report)["job"] = std::move(job);
  return 0;
}

}  // namespace faultline::cli
