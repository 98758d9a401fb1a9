/* A leaf whose call-frame information is corrupt, as a stray write would
 * leave it: its program holds a DW_CFA_def_cfa_expression whose length
 * (2^64 - 11, as ULEB128) wraps the reader back onto the opcode itself. An
 * unwinder that follows the length without checking it against the record
 * loops forever. The linker refuses such a record, so the program links a
 * valid one (length 0, padded to ten bytes) and rewrites it in memory before
 * the crash. main -> trigger -> bad_cfi_leaf, which reads address 0; the
 * report must still name trigger and main. Usage: badcfi */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NOINLINE __attribute__((noinline))

int bad_cfi_leaf(void);
__asm__(
    ".text\n"
    ".globl bad_cfi_leaf\n"
    ".type bad_cfi_leaf,@function\n"
    "bad_cfi_leaf:\n"
    ".cfi_startproc\n"
    "  xorl %eax, %eax\n"
    ".cfi_escape 0x0f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00\n"
    "  movl (%rax), %eax\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size bad_cfi_leaf, .-bad_cfi_leaf\n");

static const unsigned char kValid[11] = {0x0f, 0x80, 0x80, 0x80, 0x80, 0x80,
                                         0x80, 0x80, 0x80, 0x80, 0x00};
static const unsigned char kWrapping[11] = {0x0f, 0xf5, 0xff, 0xff, 0xff, 0xff,
                                            0xff, 0xff, 0xff, 0xff, 0x01};
static int g_patched;

/* Rewrites the record in the executable's read-only segments. */
static int patch(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  (void)arg;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || (ph->p_flags & PF_X)) continue;
    unsigned char* lo = (unsigned char*)(info->dlpi_addr + ph->p_vaddr);
    unsigned char* end = lo + ph->p_memsz;
    unsigned char* hit = memmem(lo, ph->p_memsz, kValid, sizeof kValid);
    if (hit == kValid) /* the pattern itself, in .rodata */
      hit = memmem(hit + 1, (size_t)(end - hit - 1), kValid, sizeof kValid);
    if (!hit) continue;
    uintptr_t page = (uintptr_t)hit & ~(uintptr_t)4095;
    size_t len = ((uintptr_t)hit + sizeof kWrapping - page + 4095) & ~(size_t)4095;
    if (mprotect((void*)page, len, PROT_READ | PROT_WRITE) != 0) return 0;
    memcpy(hit, kWrapping, sizeof kWrapping);
    mprotect((void*)page, len, PROT_READ);
    g_patched = 1;
  }
  return 1; /* the executable is the first module */
}

volatile int g_sink;

NOINLINE int trigger(void) {
  int r = bad_cfi_leaf();
  g_sink = r; /* not a tail call */
  return r + 1;
}

int main(void) {
  dl_iterate_phdr(patch, NULL);
  if (!g_patched) {
    fprintf(stderr, "badcfi: the call-frame record was not found\n");
    return 3;
  }
  g_sink = trigger();
  return 0;
}
