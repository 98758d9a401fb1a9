// A crash whose pc is a PLT stub: the program makes the pages of its own
// PLT (.plt, .plt.sec) unexecutable, then calls strlen through it, so the
// fault is taken at the first byte of the stub (gdb: `strlen@plt`). main and
// the caller sit on pages of their own (aligned to 4096), which stay
// executable. Used by test_plt.py.
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uintptr_t g_bias;

static int find_bias(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  g_bias = info->dlpi_addr;  // the first object is the executable
  return 1;
}

// Makes the pages of the executable's .plt and .plt.sec unexecutable, in
// one mprotect: nothing after it may call through the PLT (this function
// too sits on a page of its own).
__attribute__((noinline, aligned(4096))) static int protect_plt(void) {
  int fd = open("/proc/self/exe", O_RDONLY);
  if (fd < 0) return -1;
  Elf64_Ehdr eh;
  Elf64_Shdr sh[128], strsh;
  char names[4096];
  if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || eh.e_shnum > 128 ||
      pread(fd, sh, eh.e_shnum * sizeof sh[0], eh.e_shoff) != (ssize_t)(eh.e_shnum * sizeof sh[0]))
    return -1;
  strsh = sh[eh.e_shstrndx];
  ssize_t got = pread(fd, names, sizeof names - 1, strsh.sh_offset);
  if (got <= 0) return -1;
  names[got] = 0;
  close(fd);
  dl_iterate_phdr(find_bias, NULL);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < eh.e_shnum; ++i) {
    const char* n = names + sh[i].sh_name;
    if (sh[i].sh_name >= (size_t)got || (strcmp(n, ".plt") && strcmp(n, ".plt.sec"))) continue;
    uintptr_t a = (g_bias + sh[i].sh_addr) & ~(uintptr_t)4095;
    uintptr_t b = (g_bias + sh[i].sh_addr + sh[i].sh_size + 4095) & ~(uintptr_t)4095;
    if (a < lo) lo = a;
    if (b > hi) hi = b;
  }
  if (hi == 0) return -1;
  return mprotect((void*)lo, hi - lo, PROT_READ);
}

volatile size_t sink;

__attribute__((noinline, aligned(4096))) void call_through_plt(const char* s) {
  sink = strlen(s);
  sink += 1;
}

__attribute__((aligned(4096))) int main(int argc, char** argv) {
  (void)argc;
  sink = strlen(argv[0]);  // binds strlen's slot first (lazy binding)
  if (protect_plt() != 0) {
    fputs("plt: cannot find or protect the PLT\n", stderr);
    return 2;
  }
  call_through_plt(argv[0]);
  return 0;
}
