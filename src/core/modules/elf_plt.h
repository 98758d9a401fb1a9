// Code the symbol tables do not name: PLT stubs, named as gdb names them
// ("strlen@plt", from the relocation of the GOT slot the stub jumps
// through), and the section check that keeps an unsized symbol (`_init`)
// from covering the code after its section (the PLT).
//
// Pure ELF reading through a caller's read function, no heap, bounded: the
// crash path reads with pread(2) (core/modules/elf_symbols.cpp), the
// offline symbolizer the same way (src/symbolize/module.cpp), so both name
// a stub alike. Async-signal-safe.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace faultline::core {

// Reads n bytes at offset off of an ELF file; false when it cannot.
struct ElfReader {
  bool (*read)(const void* ctx, void* dst, uint64_t off, size_t n);
  const void* ctx;
};

// Reads all n bytes at offset off of file descriptor fd with pread(2).
bool pread_full(int fd, void* dst, uint64_t off, size_t n);
// An ElfReader's read over a file descriptor: ctx points to the int.
bool read_fd(const void* ctx, void* dst, uint64_t off, size_t n);

// True when section `shndx` of the file holds the link-time address `addr`
// (its [sh_addr, sh_addr + sh_size)); false when it does not or the header
// cannot be read. A debug file's headers give the module's addresses too.
bool section_holds(const ElfReader& r, unsigned shndx, uint64_t addr);

// If the link-time address `addr` lies in a PLT stub of the file (.plt,
// .plt.sec, .plt.got on x86-64; .plt on aarch64) whose GOT slot a dynamic
// relocation names, writes "NAME@plt" ("*ABS*+0xADDR@plt" for an IFUNC of the
// module's own, as gdb spells it) into name[0..size), the stub's first
// address into *start, and returns true. False for the PLT's header and an
// IBT PLT's lazy-binding stubs (gdb names neither), for any stub whose code
// or relocation is not the expected shape, and for a name that does not fit.
bool plt_stub_name(const ElfReader& r, uint64_t addr, char* name, size_t size, uint64_t* start);

}  // namespace faultline::core
