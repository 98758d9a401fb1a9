// The kernel's side of a seccomp filter, for seccomp_filter.cpp: which
// classic BPF programs it accepts, and what one answers for a system call.
#include <stddef.h>

#include "install/seccomp_filter.h"

namespace faultline::install {
namespace {

uint32_t load_word(const seccomp_data& d, uint32_t off) {
  uint32_t v;
  __builtin_memcpy(&v, reinterpret_cast<const char*>(&d) + off, 4);
  return v;
}

SeccompVerdict verdict_of(uint32_t ret) {
  switch (ret & SECCOMP_RET_ACTION_FULL) {
    case SECCOMP_RET_ALLOW:
    case SECCOMP_RET_LOG:
      return SeccompVerdict::kAllow;
    case SECCOMP_RET_ERRNO:
    case SECCOMP_RET_TRACE:       // ENOSYS without a tracer
    case SECCOMP_RET_USER_NOTIF:  // a supervisor's answer; ENOSYS without one
      return SeccompVerdict::kRefuse;
    default:  // KILL_PROCESS, KILL_THREAD, TRAP, and what the kernel does not know
      return SeccompVerdict::kFatal;
  }
}

// The instruction codes a seccomp filter may use, exactly (any other bit
// set: the kernel refuses the filter). BPF_MOD and the byte and half-word
// loads are classic BPF but not seccomp.
bool code_allowed(uint16_t code) {
  switch (code) {
    case BPF_LD | BPF_W | BPF_ABS:
    case BPF_LD | BPF_W | BPF_LEN:
    case BPF_LDX | BPF_W | BPF_LEN:
    case BPF_LD | BPF_IMM:
    case BPF_LDX | BPF_IMM:
    case BPF_LD | BPF_MEM:
    case BPF_LDX | BPF_MEM:
    case BPF_ST:
    case BPF_STX:
    case BPF_MISC | BPF_TAX:
    case BPF_MISC | BPF_TXA:
    case BPF_RET | BPF_K:
    case BPF_RET | BPF_A:
    case BPF_ALU | BPF_NEG:
    case BPF_JMP | BPF_JA:
      return true;
    default:
      break;
  }
  uint16_t op = BPF_OP(code);
  if (BPF_CLASS(code) == BPF_ALU) {
    bool known = op == BPF_ADD || op == BPF_SUB || op == BPF_MUL || op == BPF_DIV ||
                 op == BPF_AND || op == BPF_OR || op == BPF_XOR || op == BPF_LSH || op == BPF_RSH;
    return known && (code & ~(0xf0 | BPF_X | 0x07)) == 0;
  }
  if (BPF_CLASS(code) == BPF_JMP) {
    bool known = op == BPF_JEQ || op == BPF_JGT || op == BPF_JGE || op == BPF_JSET;
    return known && (code & ~(0xf0 | BPF_X | 0x07)) == 0;
  }
  return false;
}

// The kernel refuses a program that may read a scratch cell no path has
// written: one pass, the cells written so far carried to each jump target
// (the cells written on every path that reaches an instruction).
bool scratch_written_before_read(const sock_filter* prog, unsigned n) {
  uint16_t masks[BPF_MAXINSNS];
  for (unsigned i = 0; i < n; ++i) masks[i] = 0xffff;
  uint16_t written = 0;
  for (unsigned pc = 0; pc < n; ++pc) {
    const sock_filter& f = prog[pc];
    written &= masks[pc];
    if (f.code == BPF_ST || f.code == BPF_STX) {
      written |= static_cast<uint16_t>(1u << f.k);
    } else if (f.code == (BPF_LD | BPF_MEM) || f.code == (BPF_LDX | BPF_MEM)) {
      if (!(written & (1u << f.k))) return false;
    } else if (f.code == (BPF_JMP | BPF_JA)) {
      masks[pc + 1 + f.k] &= written;
      written = 0xffff;
    } else if (BPF_CLASS(f.code) == BPF_JMP) {
      masks[pc + 1 + f.jt] &= written;
      masks[pc + 1 + f.jf] &= written;
      written = 0xffff;
    }
  }
  return true;
}

}  // namespace

bool seccomp_valid(const sock_filter* prog, unsigned n) {
  if (n == 0 || n > BPF_MAXINSNS) return false;
  for (unsigned pc = 0; pc < n; ++pc) {
    const sock_filter& f = prog[pc];
    if (!code_allowed(f.code)) return false;
    switch (BPF_CLASS(f.code)) {
      case BPF_LD:
      case BPF_LDX:
        if (BPF_MODE(f.code) == BPF_ABS && ((f.k & 3) || f.k >= sizeof(seccomp_data))) return false;
        if (BPF_MODE(f.code) == BPF_MEM && f.k >= BPF_MEMWORDS) return false;
        break;
      case BPF_ST:
      case BPF_STX:
        if (f.k >= BPF_MEMWORDS) return false;
        break;
      case BPF_ALU:
        if (BPF_SRC(f.code) == BPF_K && BPF_OP(f.code) == BPF_DIV && f.k == 0) return false;
        if (BPF_SRC(f.code) == BPF_K && (BPF_OP(f.code) == BPF_LSH || BPF_OP(f.code) == BPF_RSH) &&
            f.k >= 32) {
          return false;
        }
        break;
      case BPF_JMP:
        if (BPF_OP(f.code) == BPF_JA) {
          if (f.k >= n - pc - 1) return false;
        } else if (pc + 1 + f.jt >= n || pc + 1 + f.jf >= n) {
          return false;
        }
        break;
      default:
        break;
    }
  }
  return BPF_CLASS(prog[n - 1].code) == BPF_RET && scratch_written_before_read(prog, n);
}

SeccompVerdict seccomp_evaluate(const sock_filter* prog, unsigned n, const seccomp_data& data) {
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
  for (unsigned pc = 0; pc < n; ++pc) {
    const sock_filter& f = prog[pc];
    uint32_t k = f.k;
    switch (BPF_CLASS(f.code)) {
      case BPF_LD:
      case BPF_LDX: {
        uint32_t v = 0;
        switch (BPF_MODE(f.code)) {
          case BPF_ABS:
            v = load_word(data, k);
            break;
          case BPF_IMM:
            v = k;
            break;
          case BPF_MEM:
            v = mem[k % BPF_MEMWORDS];
            break;
          case BPF_LEN:
            v = sizeof(seccomp_data);
            break;
          default:
            break;
        }
        (BPF_CLASS(f.code) == BPF_LD ? a : x) = v;
        break;
      }
      case BPF_ST:
      case BPF_STX:
        mem[k % BPF_MEMWORDS] = BPF_CLASS(f.code) == BPF_ST ? a : x;
        break;
      case BPF_ALU: {
        uint32_t s = BPF_SRC(f.code) == BPF_X ? x : k;
        switch (BPF_OP(f.code)) {
          case BPF_ADD:
            a += s;
            break;
          case BPF_SUB:
            a -= s;
            break;
          case BPF_MUL:
            a *= s;
            break;
          case BPF_DIV:
            if (s == 0) return verdict_of(0);  // the program ends, returning 0
            a /= s;
            break;
          case BPF_OR:
            a |= s;
            break;
          case BPF_AND:
            a &= s;
            break;
          case BPF_XOR:
            a ^= s;
            break;
          // As the kernel's translation runs them: the count taken mod 32.
          case BPF_LSH:
            a <<= (s & 31);
            break;
          case BPF_RSH:
            a >>= (s & 31);
            break;
          case BPF_NEG:
            a = 0u - a;
            break;
          default:
            break;
        }
        break;
      }
      case BPF_JMP:
        if (BPF_OP(f.code) == BPF_JA) {
          pc += k;
        } else {
          uint32_t s = BPF_SRC(f.code) == BPF_X ? x : k;
          bool taken = false;
          switch (BPF_OP(f.code)) {
            case BPF_JEQ:
              taken = a == s;
              break;
            case BPF_JGT:
              taken = a > s;
              break;
            case BPF_JGE:
              taken = a >= s;
              break;
            case BPF_JSET:
              taken = (a & s) != 0;
              break;
            default:
              break;
          }
          pc += taken ? f.jt : f.jf;
        }
        break;
      case BPF_RET:
        return verdict_of(BPF_RVAL(f.code) == BPF_A ? a : k);
      case BPF_MISC:
        if (BPF_MISCOP(f.code) == BPF_TAX) {
          x = a;
        } else {
          a = x;
        }
        break;
      default:
        break;
    }
  }
  return verdict_of(0);  // not reached by a valid program (it ends in a return)
}

}  // namespace faultline::install
