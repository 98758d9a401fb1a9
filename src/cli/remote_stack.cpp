// Native stacks of another process's stopped threads (see remote_stack.h).
#include "cli/remote_stack.h"

#include <elf.h>
#include <fmt/format.h>
#include <link.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include <cstring>

#include "core/base/arch.h"
#include "core/base/safe_read.h"
#include "core/modules/module_snapshot.h"
#include "core/modules/modules.h"
#include "core/unwind/unwind.h"
#include "core/unwind/unwind_with_cfi.h"

namespace faultline::cli {

namespace {

// What the kernel writes only for a fault, not for a stopped thread: left
// out of a live dump's registers.
bool fault_only(const char* name) {
  for (const char* n : {"err", "trapno", "cr2", "csgsfs", "oldmask", "far", "esr"})
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

}  // namespace

bool remote_registers(pid_t tid, ucontext_t* uc, nlohmann::json* registers) {
  user_regs_struct r{};
  struct iovec io = {&r, sizeof r};
  // A 32-bit process's registers are smaller: not this layout.
  if (ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, &io) != 0 || io.iov_len != sizeof r) return false;
  *uc = ucontext_t{};
#if defined(__x86_64__)
  greg_t* g = uc->uc_mcontext.gregs;
  const std::pair<int, unsigned long long> regs[] = {
      {REG_R8, r.r8},   {REG_R9, r.r9},   {REG_R10, r.r10},   {REG_R11, r.r11}, {REG_R12, r.r12},
      {REG_R13, r.r13}, {REG_R14, r.r14}, {REG_R15, r.r15},   {REG_RDI, r.rdi}, {REG_RSI, r.rsi},
      {REG_RBP, r.rbp}, {REG_RBX, r.rbx}, {REG_RDX, r.rdx},   {REG_RAX, r.rax}, {REG_RCX, r.rcx},
      {REG_RSP, r.rsp}, {REG_RIP, r.rip}, {REG_EFL, r.eflags}};
  for (const auto& [index, value] : regs) g[index] = static_cast<greg_t>(value);
#elif defined(__aarch64__)
  mcontext_t& m = uc->uc_mcontext;
  for (int i = 0; i < 31; ++i) m.regs[i] = r.regs[i];
  m.sp = r.sp;
  m.pc = r.pc;
  m.pstate = r.pstate;
#endif
  core::ArchReg named[core::kArchRegMax];
  int n = core::uc_registers(*uc, named);
  *registers = nlohmann::json::object();
  for (int i = 0; i < n; ++i) {
    if (!fault_only(named[i].name))
      (*registers)[named[i].name] = fmt::format("{:#x}", named[i].value);
  }
  return true;
}

bool remote_image(uintptr_t base, uintptr_t* bias, uintptr_t* eh_frame_hdr) {
  // As the crash path reads a module's image (core/modules): the ELF header
  // where the module begins, then its program headers.
  ElfW(Ehdr) eh;
  if (!core::safe_read_obj(&eh, base) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_phentsize != sizeof(ElfW(Phdr)))
    return false;
  ElfW(Phdr) ph[64];
  size_t phnum = eh.e_phnum < 64 ? eh.e_phnum : 64;
  if (phnum == 0 || !core::safe_read(ph, base + eh.e_phoff, phnum * sizeof ph[0])) return false;
  uintptr_t lo = UINTPTR_MAX;
  for (size_t i = 0; i < phnum; ++i)
    if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < lo) lo = ph[i].p_vaddr;
  if (lo == UINTPTR_MAX) return false;
  // base = bias + the page of the lowest PT_LOAD.
  *bias = base - (lo & ~static_cast<uintptr_t>(4095));
  *eh_frame_hdr = 0;
  for (size_t i = 0; i < phnum; ++i)
    if (ph[i].p_type == PT_GNU_EH_FRAME) *eh_frame_hdr = *bias + ph[i].p_vaddr;
  return true;
}

bool remote_unwind_modules(const core::ModuleTable& table, core::Arena* arena) {
  core::CfiModules cfi = {nullptr, 0};
  bool ok = core::cfi_modules_from_table(table, &cfi, arena);
  core::unwind_cfi_set_modules(cfi);
  return ok;
}

void remote_unwind(const ucontext_t& uc, const core::ModuleTable& table, core::ThreadCapture* t,
                   int max_frames, core::CaptureErrors* errors) {
  core::unwind_from_context(&uc, table, t, max_frames, errors);
  for (int i = 0; i < t->nframes; ++i)
    t->frames[i].module = core::find_module(table, t->frames[i].pc);
}

}  // namespace faultline::cli
