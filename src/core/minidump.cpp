// The minidump writer (see minidump.h). The layout follows the public
// minidump format (Microsoft's MINIDUMP_* structures, with the Linux streams
// and conventions Breakpad defines): a 32-byte header, the stream directory,
// then the streams, every one 8-byte aligned.
#include "core/minidump.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/safe_read.h"
#include "core/str.h"

namespace faultline::core {
namespace {

constexpr uint32_t kSignature = 0x504d444d;  // "MDMP"
constexpr uint32_t kVersion = 0xa793;
constexpr uint32_t kThreadListStream = 3;
constexpr uint32_t kModuleListStream = 4;
constexpr uint32_t kMemoryListStream = 5;
constexpr uint32_t kExceptionStream = 6;
constexpr uint32_t kSystemInfoStream = 7;
constexpr uint32_t kLinuxCpuInfo = 0x47670003;
constexpr uint32_t kLinuxProcStatus = 0x47670004;
constexpr uint32_t kLinuxLsbRelease = 0x47670005;
constexpr uint32_t kLinuxCmdLine = 0x47670006;
constexpr uint32_t kLinuxAuxv = 0x47670008;
constexpr uint32_t kLinuxMaps = 0x47670009;
constexpr int kMaxStreams = 16;
constexpr uint32_t kHeaderSize = 32;
constexpr uint32_t kDirectoryEntrySize = 12;

constexpr uint32_t kContextAmd64 = 0x00100000;
constexpr uint32_t kContextControl = kContextAmd64 | 0x1;
constexpr uint32_t kContextInteger = kContextAmd64 | 0x2;
constexpr uint32_t kContextFloatingPoint = kContextAmd64 | 0x8;
constexpr uint16_t kCpuArchitectureAmd64 = 9;
constexpr uint32_t kOsLinux = 0x8201;
constexpr uint32_t kCvSignatureRsds = 0x53445352;  // "RSDS"

// MDRawContextAMD64 (CONTEXT_AMD64): 1232 bytes.
struct __attribute__((packed)) ContextAmd64 {
  uint64_t p_home[6];
  uint32_t context_flags;
  uint32_t mx_csr;
  uint16_t cs, ds, es, fs, gs, ss;
  uint32_t eflags;
  uint64_t dr[6];
  uint64_t rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi;
  uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
  uint64_t rip;
  uint8_t flt_save[512];  // FXSAVE layout, as struct _libc_fpstate
  uint8_t vector_register[26 * 16];
  uint64_t vector_control;
  uint64_t debug_control, last_branch_to_rip, last_branch_from_rip, last_exception_to_rip,
      last_exception_from_rip;
};
static_assert(sizeof(ContextAmd64) == 1232, "MDRawContextAMD64 is 1232 bytes");

struct __attribute__((packed)) Location {
  uint32_t data_size;
  uint32_t rva;
};

struct __attribute__((packed)) MemoryDescriptor {
  uint64_t start;
  Location memory;
};

struct __attribute__((packed)) RawThread {
  uint32_t thread_id, suspend_count, priority_class, priority;
  uint64_t teb;
  MemoryDescriptor stack;
  Location context;
};
static_assert(sizeof(RawThread) == 48, "MDRawThread is 48 bytes");

struct __attribute__((packed)) RawModule {
  uint64_t base_of_image;
  uint32_t size_of_image, checksum, time_date_stamp, module_name_rva;
  uint32_t version_info[13];
  Location cv_record, misc_record;
  uint64_t reserved0, reserved1;
};
static_assert(sizeof(RawModule) == 108, "MDRawModule is 108 bytes");

struct __attribute__((packed)) ExceptionStream {
  uint32_t thread_id;
  uint32_t align;
  uint32_t exception_code, exception_flags;
  uint64_t exception_record, exception_address;
  uint32_t number_parameters, align2;
  uint64_t exception_information[15];
  Location thread_context;
};
static_assert(sizeof(ExceptionStream) == 168, "MDRawExceptionStream is 168 bytes");

struct __attribute__((packed)) SystemInfo {
  uint16_t processor_architecture, processor_level, processor_revision;
  uint8_t number_of_processors, product_type;
  uint32_t major_version, minor_version, build_number, platform_id, csd_version_rva;
  uint16_t suite_mask, reserved2;
  uint32_t vendor_id[3], version_information, feature_information, amd_extended_features;
};
static_assert(sizeof(SystemInfo) == 56, "MDRawSystemInfo is 56 bytes");

struct __attribute__((packed)) DirectoryEntry {
  uint32_t stream_type;
  Location location;
};

// Sequential output through one static buffer (the crash path has one writer
// at a time: the owner of the crash). `pos` is the file offset of buf[0].
constexpr size_t kBufSize = 128 * 1024;
char g_buf[kBufSize];
// A thread's stack window is reserved in g_buf in one piece (put_stack).
static_assert(kMinidumpMaxStack <= kBufSize, "the stack window fits the output buffer");
static_assert(kMinidumpDefaultStack <= kMinidumpMaxStack, "the default window is within the cap");

struct Out {
  int fd;
  uint64_t pos;  // file offset of g_buf[0]
  size_t len;    // bytes in g_buf
  int err;

  uint32_t rva() const { return static_cast<uint32_t>(pos + len); }
  void flush() {
    size_t done = 0;
    while (done < len && !err) {
      ssize_t n = write(fd, g_buf + done, len - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) err = n < 0 ? errno : EIO;
      if (n > 0) done += static_cast<size_t>(n);
    }
    pos += len;
    len = 0;
  }
  // Room for n contiguous bytes at g_buf + len (n <= kBufSize).
  char* reserve(size_t n) {
    if (len + n > kBufSize) flush();
    return g_buf + len;
  }
  void put(const void* p, size_t n) {
    const char* s = static_cast<const char*>(p);
    while (n > 0) {
      if (len == kBufSize) flush();
      size_t k = kBufSize - len < n ? kBufSize - len : n;
      memcpy(g_buf + len, s, k);
      len += k;
      s += k;
      n -= k;
    }
  }
  void align8() {
    static const char zeros[8] = {};
    uint64_t at = pos + len;
    if (at % 8) put(zeros, 8 - at % 8);
  }
};

struct Streams {
  DirectoryEntry entries[kMaxStreams];
  int count;
  void add(uint32_t type, uint32_t rva, uint32_t size) {
    if (count < kMaxStreams) entries[count++] = DirectoryEntry{type, Location{size, rva}};
  }
};

// MDString: a 32-bit byte length, then UTF-16LE code units and a terminating 0.
uint32_t put_string(Out& o, const char* s, size_t n) {
  o.align8();
  uint32_t rva = o.rva();
  // Count the code units first (UTF-8 decoded; bad bytes become U+FFFD).
  uint32_t units = 0;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      uint32_t bytes = units * 2;
      o.put(&bytes, 4);
    }
    size_t i = 0;
    while (i < n) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      uint32_t cp = 0xfffd;
      size_t k = 1;
      if (c < 0x80) {
        cp = c;
      } else if ((c & 0xe0) == 0xc0 || (c & 0xf0) == 0xe0 || (c & 0xf8) == 0xf0) {
        size_t need = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
        uint32_t v = c & (need == 2 ? 0x1f : need == 3 ? 0x0f : 0x07);
        size_t j = 1;
        for (; j < need && i + j < n; ++j) {
          unsigned char d = static_cast<unsigned char>(s[i + j]);
          if ((d & 0xc0) != 0x80) break;
          v = (v << 6) | (d & 0x3f);
        }
        if (j == need && v <= 0x10ffff) {
          cp = v;
          k = need;
        }
      }
      i += k;
      if (cp >= 0x10000) {
        if (pass == 0) {
          units += 2;
        } else {
          uint16_t pair[2] = {static_cast<uint16_t>(0xd800 + ((cp - 0x10000) >> 10)),
                              static_cast<uint16_t>(0xdc00 + ((cp - 0x10000) & 0x3ff))};
          o.put(pair, 4);
        }
      } else if (pass == 0) {
        ++units;
      } else {
        uint16_t u = static_cast<uint16_t>(cp);
        o.put(&u, 2);
      }
    }
  }
  uint16_t zero = 0;
  o.put(&zero, 2);
  return rva;
}

// Copies a file (at most `cap` bytes) into a stream of its own. Missing
// files are left out.
void put_file(Out& o, Streams& st, uint32_t type, const char* path, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  o.align8();
  uint32_t rva = o.rva();
  size_t total = 0;
  while (total < cap) {
    size_t want = cap - total < 4096 ? cap - total : 4096;
    char* dst = o.reserve(want);
    ssize_t n = read(fd, dst, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    o.len += static_cast<size_t>(n);
    total += static_cast<size_t>(n);
  }
  close(fd);
  st.add(type, rva, static_cast<uint32_t>(total));
}

void fill_context(ContextAmd64* ctx, const MinidumpThread& t) {
  memset(ctx, 0, sizeof *ctx);
  ctx->context_flags = kContextAmd64;
  if (!t.gregs) return;
  const greg_t* g = t.gregs;
  ctx->context_flags = kContextControl | kContextInteger;
  ctx->rax = static_cast<uint64_t>(g[REG_RAX]);
  ctx->rbx = static_cast<uint64_t>(g[REG_RBX]);
  ctx->rcx = static_cast<uint64_t>(g[REG_RCX]);
  ctx->rdx = static_cast<uint64_t>(g[REG_RDX]);
  ctx->rsi = static_cast<uint64_t>(g[REG_RSI]);
  ctx->rdi = static_cast<uint64_t>(g[REG_RDI]);
  ctx->rbp = static_cast<uint64_t>(g[REG_RBP]);
  ctx->rsp = static_cast<uint64_t>(g[REG_RSP]);
  ctx->r8 = static_cast<uint64_t>(g[REG_R8]);
  ctx->r9 = static_cast<uint64_t>(g[REG_R9]);
  ctx->r10 = static_cast<uint64_t>(g[REG_R10]);
  ctx->r11 = static_cast<uint64_t>(g[REG_R11]);
  ctx->r12 = static_cast<uint64_t>(g[REG_R12]);
  ctx->r13 = static_cast<uint64_t>(g[REG_R13]);
  ctx->r14 = static_cast<uint64_t>(g[REG_R14]);
  ctx->r15 = static_cast<uint64_t>(g[REG_R15]);
  ctx->rip = static_cast<uint64_t>(g[REG_RIP]);
  ctx->eflags = static_cast<uint32_t>(g[REG_EFL]);
  uint64_t csgsfs = static_cast<uint64_t>(g[REG_CSGSFS]);
  ctx->cs = static_cast<uint16_t>(csgsfs & 0xffff);
  ctx->gs = static_cast<uint16_t>((csgsfs >> 16) & 0xffff);
  ctx->fs = static_cast<uint16_t>((csgsfs >> 32) & 0xffff);
  // The FXSAVE area lives on the interrupted thread's stack (signal frame):
  // read it like any foreign memory.
  if (t.fpregs &&
      safe_read(ctx->flt_save, reinterpret_cast<uintptr_t>(t.fpregs), sizeof ctx->flt_save)) {
    ctx->context_flags |= kContextFloatingPoint;
    memcpy(&ctx->mx_csr, ctx->flt_save + 24, 4);
  }
}

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
  si.processor_architecture = kCpuArchitectureAmd64;
  si.platform_id = kOsLinux;
  si.csd_version_rva = csd_rva;
  si.number_of_processors = static_cast<uint8_t>(count_cpus());
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    si.vendor_id[0] = b;
    si.vendor_id[1] = d;
    si.vendor_id[2] = c;
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    si.version_information = a;
    si.feature_information = d;
    unsigned family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    if (family == 0xf) family += (a >> 20) & 0xff;
    if (family == 0x6 || family >= 0xf) model += ((a >> 16) & 0xf) << 4;
    si.processor_level = static_cast<uint16_t>(family);
    si.processor_revision = static_cast<uint16_t>((model << 8) | (a & 0xf));
  }
  if (__get_cpuid(0x80000001, &a, &b, &c, &d)) si.amd_extended_features = d;
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
    ContextAmd64 ctx;
    fill_context(&ctx, t);
    o.align8();
    g_thread_out[i].context = Location{sizeof ctx, o.rva()};
    o.put(&ctx, sizeof ctx);
    if (t.tid == in.crashed_tid) crash_context = g_thread_out[i].context;
    g_thread_out[i].stack = t.gregs ? put_stack(o, t, ctx.rsp, window) : MemoryDescriptor{};
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
