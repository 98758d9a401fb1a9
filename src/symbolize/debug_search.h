// Finding a module's separate debug information, in the order debuggers use:
// .gnu_debuglink (next to the module, its .debug/ subfolder, then under the
// debug root), the debug root's .build-id tree, each --debug-dir, and last a
// debuginfod server. Every candidate must prove it belongs to the module
// (same build-id, or the debuglink CRC when there is no build-id) before it
// is used. Internal to the symbolizer.
#pragma once

#include <elfutils/libdw.h>

#include <memory>
#include <string>
#include <vector>

#include "symbolize/elf_file.h"
#include "symbolize/symbolize.h"

namespace faultline::symbolize::internal {

struct SearchRequest {
  std::string module_path;        // the path the report names (may not exist here)
  const ElfFile* main = nullptr;  // the module file when it is present and the right build
  std::string build_id;  // hex; the module's own, or the report's when the file is unusable
};

// An accepted debug file with its DWARF opened. Owns both.
struct DebugFile {
  std::unique_ptr<ElfFile> file;
  Dwarf* dwarf = nullptr;
  DebugSource source = DebugSource::kNone;
  DebugFile() = default;
  DebugFile(DebugFile&&) noexcept;
  DebugFile& operator=(DebugFile&&) noexcept;
  ~DebugFile();
};

// Searches the separate locations (not the module itself). Returns a
// DebugFile with dwarf == nullptr when nothing matched; `notes` collects
// candidates that were present but rejected (wrong build-id, damaged DWARF).
DebugFile find_separate_debug(const SearchRequest& request, const SearchOptions& options,
                              std::vector<std::string>* notes);

// Finds the supplementary file of a dwz-compressed debug file
// (.gnu_debugaltlink) and returns it opened, or an empty DebugFile.
DebugFile find_alt_debug(const std::string& debug_file_path, const std::string& alt_name,
                         const std::string& alt_build_id, const SearchOptions& options);

}  // namespace faultline::symbolize::internal
