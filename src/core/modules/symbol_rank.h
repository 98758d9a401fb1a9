// Which of several ELF symbols at one address names it, shared by the crash
// path (core/modules/elf_symbols.cpp) and the offline symbolizer so both pick the
// same name: the global one before a weak alias before a local one, as gdb
// does from the symbol tables (raise, not gsignal or glibc's __GI_raise).
#pragma once

#include <elf.h>

namespace faultline::core {

// Higher is preferred; `bind` is ELF64_ST_BIND(st_info).
inline int symbol_binding_rank(unsigned bind) {
  switch (bind) {
    case STB_GLOBAL:
      return 3;
    case STB_WEAK:
      return 2;
    default:
      return 1;
  }
}

}  // namespace faultline::core
