// faultline dump by ptrace (see ptrace_dump.h).
#include "cli/ptrace_dump.h"

#include <elf.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libunwind-ptrace.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
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
#include <unordered_map>
#include <vector>

#include "cli/job_dump.h"
#include "cli/ptrace_stop.h"
#include "core/base/arena.h"
#include "core/base/safe_read.h"
#include "core/capture.h"
#include "core/diagnosis/classify.h"
#include "core/diagnosis/signature.h"
#include "core/modules/elf_symbols.h"
#include "core/python/interleave.h"
#include "core/python/walker.h"
#include "symbolize/elf_file.h"

namespace faultline::cli {

namespace {

using nlohmann::json;

// As the library: at most this many frames a thread.
constexpr int kMaxFrames = 100;
constexpr int kMaxCountedFrames = 10000;

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
  uint64_t base = 0, end = 0, bias = 0;
  std::string build_id;
};

// The file-backed modules of process pid, from /proc/PID/maps: each ELF
// file's lowest mapping is its base; its load bias is the base less the
// page of its first PT_LOAD.
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
    if (path.empty() || path[0] != '/' || path.find(" (deleted)") != std::string::npos) continue;
    auto it = index.find(path);
    if (it == index.end()) {
      if (off != 0) continue;  // not its first mapping: not an image we know
      index[path] = out.size();
      out.push_back(RemoteModule{path, lo, hi, lo, ""});
    } else {
      out[it->second].end = std::max<uint64_t>(out[it->second].end, hi);
    }
  }
  for (RemoteModule& m : out) {
    std::string err;
    auto elf = symbolize::internal::ElfFile::open(m.path, &err);
    if (!elf) continue;
    m.build_id = elf->build_id();
    size_t n = 0;
    if (elf_getphdrnum(elf->elf(), &n) != 0) continue;
    for (size_t i = 0; i < n; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf->elf(), static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) {
        m.bias = m.base - (ph.p_vaddr & ~static_cast<uint64_t>(ph.p_align ? ph.p_align - 1 : 0));
        break;
      }
    }
  }
  return out;
}

int module_at(const std::vector<RemoteModule>& mods, uint64_t pc) {
  for (size_t i = 0; i < mods.size(); ++i)
    if (pc >= mods[i].base && pc < mods[i].end) return static_cast<int>(i);
  return -1;
}

// libunwind's remote accessors, with memory read by process_vm_readv a page
// at a time (the threads are stopped: it does not change while they are
// read); a word that no whole page holds is read alone, else through
// libunwind's own PTRACE_PEEKDATA.
pid_t g_read_pid = 0;
std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> g_pages;
constexpr uint64_t kPage = 4096;

bool read_remote(void* dst, uint64_t addr, size_t n) {
  struct iovec local = {dst, n};
  struct iovec remote = {reinterpret_cast<void*>(addr), n};
  return process_vm_readv(g_read_pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

int read_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  if (!write) {
    uint64_t page = addr & ~(kPage - 1);
    if (addr - page <= kPage - sizeof *val) {
      auto it = g_pages.find(page);
      if (it == g_pages.end()) {
        auto buf = std::make_unique<uint8_t[]>(kPage);
        if (!read_remote(buf.get(), page, kPage)) buf.reset();
        it = g_pages.emplace(page, std::move(buf)).first;
      }
      if (it->second) {
        std::memcpy(val, it->second.get() + (addr - page), sizeof *val);
        return 0;
      }
    }
    if (read_remote(val, addr, sizeof *val)) return 0;
  }
  return _UPT_accessors.access_mem(as, addr, val, write, arg);
}

json registers_of(pid_t tid) {
#if defined(__x86_64__)
  user_regs_struct r{};
  struct iovec io = {&r, sizeof r};
  if (ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, &io) != 0 || io.iov_len != sizeof r)
    return nullptr;
  return json{{"rip", hex(r.rip)}, {"rsp", hex(r.rsp)}, {"rbp", hex(r.rbp)},
              {"rax", hex(r.rax)}, {"rbx", hex(r.rbx)}, {"rcx", hex(r.rcx)},
              {"rdx", hex(r.rdx)}, {"rsi", hex(r.rsi)}, {"rdi", hex(r.rdi)},
              {"r8", hex(r.r8)},   {"r9", hex(r.r9)},   {"r10", hex(r.r10)},
              {"r11", hex(r.r11)}, {"r12", hex(r.r12)}, {"r13", hex(r.r13)},
              {"r14", hex(r.r14)}, {"r15", hex(r.r15)}, {"eflags", hex(r.eflags)}};
#else
  (void)tid;
  return nullptr;
#endif
}

std::string thread_name(pid_t pid, pid_t tid) {
  std::string name = read_text(fmt::format("/proc/{}/task/{}/comm", pid, tid));
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

// One stopped thread's native stack, innermost first.
struct NativeStack {
  pid_t tid = 0;
  bool captured = false;
  int total = 0;
  std::vector<core::NativeFrame> frames;  // named by the library's symbolizer
  json registers;                         // read while it is stopped
  const char* note = nullptr;             // why there are no frames
};

NativeStack unwind_thread(unw_addr_space_t as, pid_t tid, const std::vector<RemoteModule>& mods) {
  NativeStack st;
  st.tid = tid;
  st.registers = registers_of(tid);
  void* upt = _UPT_create(tid);
  unw_cursor_t cur;
  if (upt && unw_init_remote(&cur, as, upt) == 0) {
    st.captured = true;
    do {
      unw_word_t ip = 0, sp = 0;
      if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0) break;
      unw_get_reg(&cur, UNW_REG_SP, &sp);
      if (++st.total > kMaxFrames) continue;
      core::NativeFrame f{};
      f.pc = ip;
      f.sp = sp;
      // The first frame's pc is where the thread stopped, not a return
      // address (the mark of a signal's interrupted frame).
      f.signal_frame = st.total == 1 || unw_is_signal_frame(&cur) > 0;
      f.module = module_at(mods, ip);
      st.frames.push_back(f);
    } while (unw_step(&cur) > 0 && st.total < kMaxCountedFrames);
  }
  if (upt) _UPT_destroy(upt);
  return st;
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
            {"unwinder", "libunwind"},
            {"frames_total", st.total},
            {"frames_truncated", st.total > static_cast<int>(st.frames.size())}};
  if (!st.captured) t["note"] = st.note ? st.note : "its stack could not be read";
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
// on the target at a moment it knows, without timing.
void test_hold(const char* where) {
  static const bool hold = [] {
    const char* v = std::getenv("FAULTLINE_TEST_DUMP_HOLD");
    return v && std::strcmp(v, "1") == 0;
  }();
  if (!hold) return;
  std::fprintf(stderr, "faultline-test: %s\n", where);
  std::fflush(stderr);
  char c = 0;
  while (::read(0, &c, 1) == 1 && c != '\n') {
  }
}

}  // namespace

int ptrace_capture(pid_t pid, json* report, std::string* why) {
  auto started = std::chrono::steady_clock::now();
  ThreadStopper stopper(pid);
  int err = stopper.stop_all(why);
  if (err) return err;
  test_hold("threads stopped");
  int64_t sec = 0;
  std::string when = utc_now(&sec);
  std::vector<RemoteModule> mods = read_modules(pid);
  // Native stacks: libunwind's remote unwinder.
  g_read_pid = pid;
  g_pages.clear();
  unw_accessors_t acc = _UPT_accessors;
  acc.access_mem = read_mem;
  unw_addr_space_t as = unw_create_addr_space(&acc, 0);
  // Per thread: the global cache blocks signals around every look-up.
  unw_set_caching_policy(as, UNW_CACHE_PER_THREAD);
  std::vector<NativeStack> stacks;
  for (const StoppedThread& t : stopper.threads()) {
    if (t.stopped) {
      stacks.push_back(unwind_thread(as, t.tid, mods));
    } else if (t.tid > 0 && ::kill(t.tid, 0) == 0) {
      NativeStack st;  // still there, but never stopped (an uninterruptible wait)
      st.tid = t.tid;
      st.note =
          "did not stop for the dump within 1 s (in vfork, or an uninterruptible wait in the "
          "kernel)";
      stacks.push_back(std::move(st));
    }
  }
  unw_destroy_addr_space(as);
  g_pages.clear();
  // Python stacks: the library's own walker, every read of it made in the
  // target (the SafeReader pinned to it).
  CoreModules cm;
  char exe[4096];
  ssize_t n = readlink(fmt::format("/proc/{}/exe", pid).c_str(), exe, sizeof exe - 1);
  to_core(mods, std::string(exe, n > 0 ? static_cast<size_t>(n) : 0), &cm);
  core::PythonCapture py{};
  core::CaptureErrors errors{};
  core::Arena arena;
  bool have_arena = arena.init(size_t{64} << 20);
  if (have_arena) {
    core::safe_read_remote(pid);
    core::capture_python(cm.table, &arena, &py, core::kMaxThreads, kMaxFrames, &errors);
  } else {
    errors.add("python: no memory for the walk");
  }
  // Everything is read: the threads go on. What follows reads only files.
  stopper.detach_all();
  test_hold("threads let go");
  auto capture_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
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
  json threads = json::array();
  for (const NativeStack& st : stacks) threads.push_back(thread_json(pid, st, py, cm, mods));
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
      {"annotations", json::object()},
      {"breadcrumbs", json::array()},
      {"faultline",
       {{"version", FAULTLINE_VERSION},
        {"capture_ns", capture_ns},
        {"safe_read", "process_vm_readv"},
        {"modules_from", "/proc/PID/maps"},
        {"errors", std::move(errs)}}}};
  if (json job = job_of(pid); !job.is_null()) (*report)["job"] = std::move(job);
  return 0;
}

}  // namespace faultline::cli
