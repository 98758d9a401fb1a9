// The minidump writer (see minidump.h). The layout follows the public
// minidump format (Microsoft's MINIDUMP_* structures, with the Linux streams
// and conventions Breakpad defines): a 32-byte header, the stream directory,
// then the streams, every one 8-byte aligned.
#include "core/minidump/minidump.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/base/safe_read.h"
#include "core/base/str.h"
#include "core/minidump/minidump_arch.h"
#include "core/minidump/minidump_format.h"
#include "core/minidump/minidump_out.h"

namespace faultline::core {
namespace {

using namespace md;

// A thread's stack window (minidump_read_stack), or the copy taken earlier.
MemoryDescriptor put_stack(Out& o, const MinidumpThread& t, uint64_t sp, size_t window) {
  MemoryDescriptor d = {};
  o.align8();
  d.memory.rva = o.rva();
  size_t got = 0;
  if (t.stack) {
    got = t.stack_len < window ? t.stack_len : window;
    d.start = t.stack_start;
    o.put(t.stack, got);
  } else {
    uint64_t start = 0;
    got = minidump_read_stack(o.reserve(window), sp, window, &start);
    d.start = start;
    o.len += got;
  }
  d.memory.data_size = static_cast<uint32_t>(got);
  if (got == 0) d = MemoryDescriptor{};
  return d;
}

int count_cpus() {
  uint64_t mask[16] = {};
  long n = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
  if (n <= 0) return 1;
  int count = 0;
  for (long i = 0; i < n / 8; ++i) {
    for (uint64_t m = mask[i]; m; m &= m - 1) ++count;  // no libgcc popcount call
  }
  return count > 255 ? 255 : count;
}

void put_system_info(Out& o, Streams& st) {
  struct utsname u;
  bool have_uname = uname(&u) == 0;
  uint32_t csd_rva = 0;
  if (have_uname) {
    char csd[sizeof u.sysname + sizeof u.release + sizeof u.version + sizeof u.machine + 4];
    StrBuf b(csd, sizeof csd);
    b.add(u.sysname).add(" ").add(u.release).add(" ").add(u.version).add(" ").add(u.machine);
    csd_rva = put_string(o, b.c_str(), b.len());
  }
  SystemInfo si = {};
  minidump_fill_cpu(&si);
  si.platform_id = kOsLinux;
  si.csd_version_rva = csd_rva;
  si.number_of_processors = static_cast<uint8_t>(count_cpus());
  if (have_uname) {  // "6.1.0-18-amd64" -> 6, 1, 0
    uint32_t parts[3] = {};
    int k = 0;
    for (const char* p = u.release; *p && k < 3; ++p) {
      if (*p >= '0' && *p <= '9') {
        parts[k] = parts[k] * 10 + static_cast<uint32_t>(*p - '0');
      } else if (*p == '.') {
        ++k;
      } else {
        break;
      }
    }
    si.major_version = parts[0];
    si.minor_version = parts[1];
    si.build_number = parts[2];
  }
  o.align8();
  uint32_t rva = o.rva();
  o.put(&si, sizeof si);
  st.add(kSystemInfoStream, rva, sizeof si);
}

// Per-thread facts gathered while writing, for the thread list (static: no heap).
struct ThreadOut {
  MemoryDescriptor stack;
  Location context;
};
constexpr int kMaxDumpThreads = 1024;
ThreadOut g_thread_out[kMaxDumpThreads];
ContextRecord g_context;  // the one being written
constexpr int kMaxDumpModules = 2048;
uint32_t g_module_name[kMaxDumpModules];
Location g_module_cv[kMaxDumpModules];

}  // namespace

size_t minidump_read_stack(char* dst, uint64_t sp, size_t window, uint64_t* start) {
  *start = 0;
  if (sp < 128 || window == 0) return 0;
  *start = (sp - 128) & ~uint64_t{15};
  if (safe_read(dst, *start, window)) return window;
  // Page by page. Unreadable pages at the start are skipped: a stack
  // overflow leaves the red zone, or sp itself, in the guard page, and the
  // frames are above it.
  uint64_t end = *start + window;
  size_t got = 0;
  for (uint64_t at = *start; at < end;) {
    size_t chunk = 4096 - (at & 4095);
    if (chunk > end - at) chunk = static_cast<size_t>(end - at);
    if (!safe_read(dst + got, at, chunk)) {
      if (got) break;
      *start = at += chunk;  // nothing yet: try the next page
      continue;
    }
    got += chunk;
    at += chunk;
  }
  return got;
}

bool write_minidump(int fd, const MinidumpInput& in, MinidumpResult* result) {
  Out o = {fd, 0, 0, 0};
  Streams st = {};
  // Header and directory are written last, at offset 0; reserve their room.
  uint32_t header_room = kHeaderSize + kMaxStreams * kDirectoryEntrySize;
  char* room = o.reserve(header_room);
  memset(room, 0, header_room);
  o.len += header_room;

  put_system_info(o, st);

  // Thread contexts and stacks, then the thread list that points at them.
  int nthreads = in.nthreads < kMaxDumpThreads ? in.nthreads : kMaxDumpThreads;
  size_t window = in.stack_bytes > kMinidumpMaxStack ? kMinidumpMaxStack : in.stack_bytes;
  Location crash_context = {};
  for (int i = 0; i < nthreads; ++i) {
    const MinidumpThread& t = in.threads[i];
    uint32_t size = minidump_fill_context(&g_context, t.regs);
    o.align8();
    g_thread_out[i].context = Location{size, o.rva()};
    o.put(&g_context, size);
    if (t.tid == in.crashed_tid) crash_context = g_thread_out[i].context;
    g_thread_out[i].stack =
        t.regs ? put_stack(o, t, minidump_regs_sp(*t.regs), window) : MemoryDescriptor{};
  }
  o.align8();
  uint32_t list_rva = o.rva();
  uint32_t count = static_cast<uint32_t>(nthreads);
  o.put(&count, 4);
  for (int i = 0; i < nthreads; ++i) {
    RawThread rt = {};
    rt.thread_id = static_cast<uint32_t>(in.threads[i].tid);
    rt.stack = g_thread_out[i].stack;
    rt.context = g_thread_out[i].context;
    o.put(&rt, sizeof rt);
  }
  st.add(kThreadListStream, list_rva, 4 + count * sizeof(RawThread));

  // The memory list: the same stack windows (readers look memory up here).
  o.align8();
  uint32_t mem_rva = o.rva();
  uint32_t nmem = 0;
  for (int i = 0; i < nthreads; ++i) nmem += g_thread_out[i].stack.memory.data_size ? 1 : 0;
  o.put(&nmem, 4);
  for (int i = 0; i < nthreads; ++i) {
    if (g_thread_out[i].stack.memory.data_size) o.put(&g_thread_out[i].stack, 16);
  }
  st.add(kMemoryListStream, mem_rva, 4 + nmem * 16);

  // Modules: names and CodeView records first, then the list.
  int nmod = 0;
  if (in.modules) nmod = in.modules->count < kMaxDumpModules ? in.modules->count : kMaxDumpModules;
  for (int i = 0; i < nmod; ++i) {
    const Module& m = in.modules->items[i];
    const char* path = m.path ? m.path : "";
    g_module_name[i] = put_string(o, path, str_len(path));
    g_module_cv[i] = Location{};
    if (m.build_id_len == 0) continue;
    // CV_INFO_PDB70 as Breakpad writes it for ELF: 'RSDS', the first 16
    // bytes of the build-id as the GUID (zero-padded), age 0, then the file
    // name. Readers turn it into the debug id Sentry derives from the
    // build-id, the one the JSON report's build_id gives.
    o.align8();
    uint32_t rva = o.rva();
    uint8_t guid[16] = {};
    memcpy(guid, m.build_id, m.build_id_len < 16 ? m.build_id_len : 16);
    uint32_t sig = kCvSignatureRsds, age = 0;
    o.put(&sig, 4);
    o.put(guid, 16);
    o.put(&age, 4);
    size_t plen = str_len(path);
    o.put(path, plen + 1);
    g_module_cv[i] = Location{static_cast<uint32_t>(24 + plen + 1), rva};
  }
  o.align8();
  uint32_t modlist_rva = o.rva();
  uint32_t mcount = static_cast<uint32_t>(nmod);
  o.put(&mcount, 4);
  for (int i = 0; i < nmod; ++i) {
    const Module& m = in.modules->items[i];
    RawModule rm = {};
    rm.base_of_image = m.base;
    rm.size_of_image = static_cast<uint32_t>(m.end > m.base ? m.end - m.base : 0);
    rm.module_name_rva = g_module_name[i];
    rm.version_info[0] = 0xfeef04bd;  // VS_FFI_SIGNATURE, the rest unknown
    rm.cv_record = g_module_cv[i];
    o.put(&rm, sizeof rm);
  }
  st.add(kModuleListStream, modlist_rva, 4 + mcount * sizeof(RawModule));

  if (in.signo > 0) {
    ExceptionStream ex = {};
    ex.thread_id = static_cast<uint32_t>(in.crashed_tid);
    ex.exception_code = static_cast<uint32_t>(in.signo);
    ex.exception_flags = static_cast<uint32_t>(in.code);
    ex.exception_address = in.address;
    ex.thread_context = crash_context;
    o.align8();
    uint32_t rva = o.rva();
    o.put(&ex, sizeof ex);
    st.add(kExceptionStream, rva, sizeof ex);
  }

  // The Linux streams Breakpad writes.
  put_file(o, st, kLinuxCpuInfo, "/proc/cpuinfo", 64 * 1024);
  put_file(o, st, kLinuxProcStatus, "/proc/self/status", 16 * 1024);
  put_file(o, st, kLinuxLsbRelease, "/etc/lsb-release", 4096);
  if (in.cmdline && in.cmdline_len > 0) {
    o.align8();
    uint32_t rva = o.rva();
    o.put(in.cmdline, static_cast<size_t>(in.cmdline_len));
    st.add(kLinuxCmdLine, rva, static_cast<uint32_t>(in.cmdline_len));
  }
  put_file(o, st, kLinuxAuxv, "/proc/self/auxv", 4096);
  put_file(o, st, kLinuxMaps, "/proc/self/maps", 4 << 20);
  o.flush();

  // Header and directory.
  char head[kHeaderSize + kMaxStreams * kDirectoryEntrySize] = {};
  uint32_t h[8] = {};
  h[0] = kSignature;
  h[1] = kVersion;
  h[2] = static_cast<uint32_t>(st.count);
  h[3] = kHeaderSize;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  h[5] = static_cast<uint32_t>(now.tv_sec);
  memcpy(head, h, kHeaderSize);
  memcpy(head + kHeaderSize, st.entries, st.count * sizeof(DirectoryEntry));
  if (!o.err) {
    long n = syscall(SYS_pwrite64, fd, head, sizeof head, 0L);
    if (n != static_cast<long>(sizeof head)) o.err = n < 0 ? errno : EIO;
  }
  result->bytes = o.pos;
  result->err = o.err;
  return o.err == 0;
}

}  // namespace faultline::core
