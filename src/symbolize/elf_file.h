// An ELF file opened read-only through libelf, with the few facts the debug
// info search needs (build-id, .gnu_debuglink, whether it carries DWARF).
// Internal to the symbolizer.
#pragma once

#include <libelf.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace faultline::symbolize::internal {

class ElfFile {
 public:
  // Opens `path`. On failure returns null and sets *error to a sentence such
  // as "cannot open /x: No such file or directory" or "/x: not an ELF file".
  // *errno_out (when given) receives the open(2) errno, 0 for other failures.
  static std::unique_ptr<ElfFile> open(const std::string& path, std::string* error,
                                       int* errno_out = nullptr);
  // Takes ownership of an open descriptor (e.g. one debuginfod returned).
  static std::unique_ptr<ElfFile> adopt(int fd, const std::string& path, std::string* error);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  Elf* elf() const { return elf_; }
  const std::string& path() const { return path_; }
  // Lower-case hex of the NT_GNU_BUILD_ID note; "" when there is none.
  const std::string& build_id() const { return build_id_; }
  // True when the file has .debug_info (plain or compressed); a stripped file has not.
  bool has_dwarf() const { return has_dwarf_; }
  // The open descriptor (for pread); owned by this object.
  int fd() const { return fd_; }
  // The .gnu_debuglink name ("" when none) and its CRC-32.
  const std::string& debuglink() const { return debuglink_; }
  uint32_t debuglink_crc() const { return debuglink_crc_; }
  // Same file on disk (device and inode)?
  bool same_file(const ElfFile& other) const { return dev_ == other.dev_ && ino_ == other.ino_; }
  // CRC-32 of the whole file, as .gnu_debuglink records it. False on read errors.
  bool crc32(uint32_t* crc) const;

 private:
  ElfFile() = default;
  bool init(int fd, const std::string& path, std::string* error);

  int fd_ = -1;
  Elf* elf_ = nullptr;
  std::string path_;
  std::string build_id_;
  std::string debuglink_;
  uint32_t debuglink_crc_ = 0;
  bool has_dwarf_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// "93ac61..." -> bytes; false when not an even number of hex digits.
bool hex_to_bytes(const std::string& hex, std::string* bytes);
std::string bytes_to_hex(const unsigned char* bytes, size_t n);

}  // namespace faultline::symbolize::internal
