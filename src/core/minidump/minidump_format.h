// The minidump file format as faultline writes it: the stream types, flags
// and packed records of the public minidump format (Microsoft's MINIDUMP_*
// structures) and the Linux streams Breakpad defines. Header-only.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace faultline::core::md {

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
// arm64 as Breakpad's Linux client writes it (and lldb reads it): its own
// architecture number and its own context record, ContextArm64 below.
constexpr uint64_t kContextArm64 = 0x80000000;
constexpr uint64_t kContextArm64Control = kContextArm64 | 0x1;
constexpr uint64_t kContextArm64Integer = kContextArm64 | 0x2;
constexpr uint64_t kContextArm64FloatingPoint = kContextArm64 | 0x4;
constexpr uint16_t kCpuArchitectureArm64 = 0x8003;
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

// Breakpad's arm64 context (MDRawContextARM64_Old): 796 bytes. The integer
// registers are x0-x28, fp (x29), lr (x30) and sp; the floating-point part
// is fpsr, fpcr and the 128-bit v0-v31.
struct __attribute__((packed)) ContextArm64 {
  uint64_t context_flags;
  uint64_t iregs[32];
  uint64_t pc;
  uint32_t cpsr;
  uint32_t fpsr, fpcr;
  uint8_t v[32 * 16];
};
static_assert(sizeof(ContextArm64) == 796, "MDRawContextARM64_Old is 796 bytes");

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

}  // namespace faultline::core::md
