#include "symbolize/elf_file.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace faultline::symbolize::internal {
namespace {

// libelf refuses to work until told which ELF version the caller speaks.
void init_libelf() {
  static const bool done = [] {
    elf_version(EV_CURRENT);
    return true;
  }();
  (void)done;
}

// The CRC-32 that GNU tools write into .gnu_debuglink (reflected polynomial
// 0xEDB88320, the same as zlib's). A table of 256 entries built on first use.
uint32_t crc32_update(uint32_t crc, const unsigned char* p, size_t n) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

}  // namespace

std::unique_ptr<ElfFile> ElfFile::open(const std::string& path, std::string* error,
                                       int* errno_out) {
  if (errno_out) *errno_out = 0;
  // O_NONBLOCK: a module path that names a FIFO must not wait for a writer
  // (init() then refuses anything but a regular file).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    if (errno_out) *errno_out = e;
    *error = "cannot open " + path + ": " + std::strerror(e);
    return nullptr;
  }
  return adopt(fd, path, error);
}

std::unique_ptr<ElfFile> ElfFile::adopt(int fd, const std::string& path, std::string* error) {
  std::unique_ptr<ElfFile> f(new ElfFile());
  if (!f->init(fd, path, error)) return nullptr;
  return f;
}

bool ElfFile::init(int fd, const std::string& path, std::string* error) {
  init_libelf();
  fd_ = fd;
  path_ = path;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *error = "cannot stat " + path + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = path + ": not a regular file";
    return false;
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  elf_ = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr ehdr;
  if (elf_ == nullptr || elf_kind(elf_) != ELF_K_ELF || gelf_getehdr(elf_, &ehdr) == nullptr) {
    *error = path + ": not an ELF file" +
             (elf_errno() != 0 ? std::string(" (") + elf_errmsg(-1) + ")" : std::string());
    return false;
  }
  const void* id = nullptr;
  ssize_t n = dwelf_elf_gnu_build_id(elf_, &id);
  if (n > 0 && n <= 64) build_id_ = bytes_to_hex(static_cast<const unsigned char*>(id), n);
  GElf_Word crc = 0;
  if (const char* link = dwelf_elf_gnu_debuglink(elf_, &crc)) {
    debuglink_ = link;
    debuglink_crc_ = crc;
  }
  // A copy cut short (a full disk, an interrupted download) still has a
  // valid header; its sections then point past the end of the file.
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // (libelf quietly reports no sections at all when their table is cut off.)
  size_t shnum = 0;
  if (elf_getshdrnum(elf_, &shnum) != 0) shnum = 0;
  if (shnum < ehdr.e_shnum) shnum = ehdr.e_shnum;
  if (shnum == 0 && ehdr.e_shoff != 0) shnum = 1;  // extended numbering: entry 0 at least
  if (shnum > 0 && (ehdr.e_shoff > file_size ||
                    static_cast<uint64_t>(shnum) * ehdr.e_shentsize > file_size - ehdr.e_shoff)) {
    *error = path + ": truncated or corrupted ELF file (section headers past the end of the file)";
    return false;
  }
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf_, &shstrndx) == 0) {
    for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn != nullptr; scn = elf_nextscn(elf_, scn)) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type == SHT_NOBITS) continue;
      const char* name = elf_strptr(elf_, shstrndx, shdr.sh_name);
      if (shdr.sh_offset > file_size || shdr.sh_size > file_size - shdr.sh_offset) {
        *error = path + ": truncated or corrupted ELF file (section " + (name ? name : "?") +
                 " extends past the end of the file)";
        return false;
      }
      if (name && (std::strcmp(name, ".debug_info") == 0 || std::strcmp(name, ".zdebug_info") == 0))
        has_dwarf_ = shdr.sh_size > 0;
    }
  }
  return true;
}

ElfFile::~ElfFile() {
  if (elf_) elf_end(elf_);
  if (fd_ >= 0) ::close(fd_);
}

bool ElfFile::crc32(uint32_t* crc) const {
  unsigned char buf[64 * 1024];
  uint32_t c = 0;
  off_t off = 0;
  for (;;) {
    ssize_t n = pread(fd_, buf, sizeof buf, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;
    c = crc32_update(c, buf, static_cast<size_t>(n));
    off += n;
  }
  *crc = c;
  return true;
}

bool hex_to_bytes(const std::string& hex, std::string* bytes) {
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

std::string bytes_to_hex(const unsigned char* bytes, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(digits[bytes[i] >> 4]);
    s.push_back(digits[bytes[i] & 15]);
  }
  return s;
}

}  // namespace faultline::symbolize::internal
