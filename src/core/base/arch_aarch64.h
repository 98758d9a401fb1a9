// aarch64's registers in a signal context. Included by arch.h only. The kernel's
// mcontext holds x0-x30, sp, pc, pstate and the fault address, then a chain
// of records (FP/SIMD, ESR, SVE...) in __reserved.
#pragma once

#include <pthread.h>
#include <stdint.h>
#include <ucontext.h>

namespace faultline::core {

constexpr const char kArchName[] = "aarch64";

// DWARF register numbers the CFI unwinder keeps: x0..x30, sp (31), and the
// pc in slot 32 (not a DWARF column: the caller's pc is what the rule of
// x30, the return-address column, gives).
constexpr int kArchCfiSp = 31, kArchCfiFp = 29, kArchCfiPc = 32, kArchCfiRa = 30;
constexpr int kArchCfiNumRegs = 33;
constexpr bool kArchCfiRaState = true;  // DW_CFA_AARCH64_negate_ra_state

// A return address without its pointer-authentication code (code built
// with -mbranch-protection signs x30 before saving it). xpaclri strips
// x30 in place; it is a hint, a no-op on a CPU without pointer
// authentication, where addresses carry no code.
inline uintptr_t strip_return_address(uintptr_t ra) {
  register uintptr_t lr __asm__("x30") = ra;
  __asm__("hint #7" : "+r"(lr));  // xpaclri
  return lr;
}

inline uintptr_t uc_pc(const ucontext_t& uc) {
  return static_cast<uintptr_t>(uc.uc_mcontext.pc);
}
inline uintptr_t uc_sp(const ucontext_t& uc) {
  return static_cast<uintptr_t>(uc.uc_mcontext.sp);
}
inline uintptr_t uc_fp(const ucontext_t& uc) {
  return static_cast<uintptr_t>(uc.uc_mcontext.regs[29]);
}

// The general registers a retried fault is compared by: x0-x30, sp, pc,
// pstate (laid out one after the other in the mcontext).
constexpr int kFaultRegCount = 34;
inline const void* uc_fault_regs(const ucontext_t& uc) {
  return uc.uc_mcontext.regs;
}

// The thread pointer (TPIDR_EL0): with the thread id it tells a thread from
// a dead one whose id the kernel reused.
inline uintptr_t thread_pointer() {
  uintptr_t tp;
  asm("mrs %0, tpidr_el0" : "=r"(tp));
  return tp;
}

// The thread's own struct pthread, which holds its kernel tid. glibc keeps
// it just below the thread pointer (TLS variant I), at a distance that
// changes between versions: pthread_self() knows it (it only reads the
// thread pointer).
inline uintptr_t pthread_self_address() {
  return reinterpret_cast<uintptr_t>(pthread_self());
}

// A record of the context's chain in __reserved (FP/SIMD, ESR...) by its
// magic: its first byte, or nullptr where the chain has none of at least
// size bytes. The records lie in the context itself, written by the
// kernel; the walk stays inside it.
inline const unsigned char* uc_record(const ucontext_t& uc, uint32_t want, uint32_t size) {
  const unsigned char* p = uc.uc_mcontext.__reserved;
  size_t at = 0;
  while (at + 8 <= sizeof uc.uc_mcontext.__reserved) {
    uint32_t magic, len;
    __builtin_memcpy(&magic, p + at, 4);
    __builtin_memcpy(&len, p + at + 4, 4);
    if (magic == 0 || len < 8 || len > sizeof uc.uc_mcontext.__reserved - at) return nullptr;
    if (magic == want) return len >= size ? p + at : nullptr;
    at += len;
  }
  return nullptr;
}

// The ESR record the kernel adds for a fault (0 where it is absent: qemu
// user mode, a signal sent by kill).
inline uint64_t uc_esr(const ucontext_t& uc) {
  constexpr uint32_t kEsrMagic = 0x45535201;
  const unsigned char* r = uc_record(uc, kEsrMagic, 16);
  uint64_t esr = 0;
  if (r) __builtin_memcpy(&esr, r + 8, 8);
  return esr;
}

// The FP/SIMD record (the kernel's fpsimd_context): fpsr at 8, fpcr at 12,
// v0-v31 from 16. The first record of every signal frame.
constexpr uint32_t kFpsimdMagic = 0x46508001, kFpsimdSize = 16 + 32 * 16;

inline PageFault uc_page_fault(const ucontext_t& uc) {
  constexpr uint64_t kEcInsnAbortLower = 0x20, kEcDataAbortLower = 0x24;
  uint64_t esr = uc_esr(uc);
  uint64_t ec = esr >> 26;
  uint64_t fsc = esr & 0x3c;  // the fault status code, less its level
  PageFault f = {};
  // Translation (0x04), access flag (0x08) and permission (0x0c) faults.
  f.known = (ec == kEcDataAbortLower || ec == kEcInsnAbortLower) && fsc >= 0x04 && fsc <= 0x0c;
  f.protection = fsc != 0x04;
  f.write = ec == kEcDataAbortLower && (esr & (1u << 6));
  f.fetch = ec == kEcInsnAbortLower;
  return f;
}

// A thread's registers as the minidump keeps them (minidump/minidump_arch.h).
struct ArchThreadRegs {
  uint64_t x[31];
  uint64_t sp, pc, pstate;
  uint32_t fpsr, fpcr;
  unsigned char v[32 * 16];  // v0-v31
  bool have_fp;
};

// Calls body(fn, arg) with the stack pointer at top (16-byte aligned), and
// comes back to this stack. x19 (callee-saved) keeps the old sp across the
// call; everything the call may change is clobbered.
inline void call_on_stack(char* top, void (*body)(void (*)(void*), void*), void (*fn)(void*),
                          void* arg) {
  register void (*x0)(void*) __asm__("x0") = fn;
  register void* x1 __asm__("x1") = arg;
  __asm__ volatile(
      "mov x19, sp\n\t"
      "mov sp, %[top]\n\t"
      "blr %[body]\n\t"
      "mov sp, x19\n\t"
      : "+r"(x0), "+r"(x1)
      : [top] "r"(top), [body] "r"(body)
      : "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15",
        "x16", "x17", "x18", "x19", "x30", "memory", "cc", "v0", "v1", "v2", "v3", "v4", "v5", "v6",
        "v7", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27",
        "v28", "v29", "v30", "v31");
}

// The registers the report lists, in its order; returns how many. The
// ESR only where the kernel gave it.
constexpr int kArchRegMax = 36;
inline int uc_registers(const ucontext_t& uc, ArchReg* out) {
  const mcontext_t& m = uc.uc_mcontext;
  int n = 0;
  for (int i = 0; i < 31; ++i, ++n) {
    char* s = out[n].name;
    __builtin_memset(s, 0, sizeof out[n].name);
    s[0] = 'x';
    if (i >= 10) {
      s[1] = static_cast<char>('0' + i / 10);
      s[2] = static_cast<char>('0' + i % 10);
    } else {
      s[1] = static_cast<char>('0' + i);
    }
    out[n].value = m.regs[i];
  }
  static const char kNames[5][8] = {"sp", "pc", "pstate", "far", "esr"};
  const uint64_t values[5] = {m.sp, m.pc, m.pstate, m.fault_address, uc_esr(uc)};
  for (int i = 0; i < 5; ++i) {
    if (i == 4 && values[i] == 0) break;
    __builtin_memcpy(out[n].name, kNames[i], sizeof out[n].name);
    out[n++].value = values[i];
  }
  return n;
}

// The audit architecture a seccomp filter sees in seccomp_data.arch.
constexpr uint32_t kArchAudit = 0xC00000B7u;

// One system call, straight to the kernel: the result or -errno, as the
// kernel returns it (the `syscall()` and `prctl()` interposers forward
// with it; libc's own are the ones they replace).
inline long arch_syscall6(long n, long a, long b, long c, long d, long e, long f) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
}

}  // namespace faultline::core
