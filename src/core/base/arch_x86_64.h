// x86-64's registers in a signal context. Included by arch.h only.
#pragma once

#include <stdint.h>
#include <ucontext.h>

namespace faultline::core {

constexpr const char kArchName[] = "x86_64";

// DWARF register numbers the CFI unwinder keeps: rax..r15, and rip (16),
// the return-address column.
constexpr int kArchCfiSp = 7, kArchCfiFp = 6, kArchCfiPc = 16, kArchCfiRa = 16;
constexpr int kArchCfiNumRegs = 17;
constexpr bool kArchCfiRaState = false;  // no DW_CFA_AARCH64_negate_ra_state

// A return address as the caller will use it (no signature bits here).
inline uintptr_t strip_return_address(uintptr_t ra) {
  return ra;
}

inline uintptr_t uc_pc(const ucontext_t& uc) {
  return static_cast<uintptr_t>(uc.uc_mcontext.gregs[REG_RIP]);
}
inline uintptr_t uc_sp(const ucontext_t& uc) {
  return static_cast<uintptr_t>(uc.uc_mcontext.gregs[REG_RSP]);
}
inline uintptr_t uc_fp(const ucontext_t& uc) {
  return static_cast<uintptr_t>(uc.uc_mcontext.gregs[REG_RBP]);
}

// The general registers a retried fault is compared by (r8 ... rip, eflags).
constexpr int kFaultRegCount = REG_EFL + 1;
inline const void* uc_fault_regs(const ucontext_t& uc) {
  return uc.uc_mcontext.gregs;
}

// The thread pointer (%fs:0, glibc's struct pthread, what pthread_self()
// returns): with the thread id it tells a thread from a dead one whose id
// the kernel reused.
inline uintptr_t thread_pointer() {
  uintptr_t tp;
  asm("mov %%fs:0, %0" : "=r"(tp));
  return tp;
}

// The thread's own struct pthread (pthread_self()), which holds its kernel
// tid: glibc keeps its address in the TCB header at %fs:0x10.
inline uintptr_t pthread_self_address() {
  uintptr_t self;
  asm volatile("mov %%fs:0x10, %0" : "=r"(self));
  return self;
}

// What the context tells of a page fault: the trap number and error code.
inline PageFault uc_page_fault(const ucontext_t& uc) {
  constexpr greg_t kTrapPageFault = 14;
  constexpr uint64_t kErrPresent = 1, kErrWrite = 1u << 1, kErrFetch = 1u << 4;
  constexpr uint64_t kErrNotProtection = (1u << 5) | (1u << 6) | (1u << 15);
  const greg_t* g = uc.uc_mcontext.gregs;
  auto err = static_cast<uint64_t>(g[REG_ERR]);
  PageFault f = {};
  f.known = g[REG_TRAPNO] == kTrapPageFault && !(err & kErrNotProtection);
  f.protection = err & kErrPresent;
  f.write = err & kErrWrite;
  f.fetch = err & kErrFetch;
  return f;
}

// A thread's registers as the minidump keeps them (minidump/minidump_arch.h).
struct ArchThreadRegs {
  greg_t gregs[NGREG];
  struct _libc_fpstate fp;  // the FXSAVE area
  bool have_fp;
};

// Calls body(fn, arg) with the stack pointer at top (16-byte aligned), and
// comes back to this stack.
inline void call_on_stack(char* top, void (*body)(void (*)(void*), void*), void (*fn)(void*),
                          void* arg) {
  __asm__ volatile(
      "mov %%rsp, %%rbx\n\t"
      "mov %[top], %%rsp\n\t"
      "call *%[body]\n\t"
      "mov %%rbx, %%rsp\n\t"
      : "+D"(fn), "+S"(arg)
      : [top] "r"(top), [body] "r"(body)
      : "rbx", "rax", "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1",
        "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)",
        "st(7)");
}

// The registers the report lists, in its order; returns how many.
constexpr int kArchRegMax = 23;
inline int uc_registers(const ucontext_t& uc, ArchReg* out) {
  struct Reg {
    char name[8];  // text, not a pointer: no relocation at load
    int index;
  };
  static const Reg kRegs[kArchRegMax] = {
      {"rax", REG_RAX}, {"rbx", REG_RBX},       {"rcx", REG_RCX},         {"rdx", REG_RDX},
      {"rsi", REG_RSI}, {"rdi", REG_RDI},       {"rbp", REG_RBP},         {"rsp", REG_RSP},
      {"r8", REG_R8},   {"r9", REG_R9},         {"r10", REG_R10},         {"r11", REG_R11},
      {"r12", REG_R12}, {"r13", REG_R13},       {"r14", REG_R14},         {"r15", REG_R15},
      {"rip", REG_RIP}, {"eflags", REG_EFL},    {"err", REG_ERR},         {"trapno", REG_TRAPNO},
      {"cr2", REG_CR2}, {"csgsfs", REG_CSGSFS}, {"oldmask", REG_OLDMASK},
  };
  for (int i = 0; i < kArchRegMax; ++i) {
    __builtin_memcpy(out[i].name, kRegs[i].name, sizeof out[i].name);
    out[i].value = static_cast<uint64_t>(uc.uc_mcontext.gregs[kRegs[i].index]);
  }
  return kArchRegMax;
}

// The audit architecture a seccomp filter sees in seccomp_data.arch.
constexpr uint32_t kArchAudit = 0xC000003Eu;

// One system call, straight to the kernel: the result or -errno, as the
// kernel returns it (the `syscall()` and `prctl()` interposers forward
// with it; libc's own are the ones they replace).
inline long arch_syscall6(long n, long a, long b, long c, long d, long e, long f) {
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

}  // namespace faultline::core
