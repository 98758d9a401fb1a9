#include "symbolize/debug_search.h"

#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "symbolize/debuginfod_fetch.h"

namespace faultline::symbolize::internal {
namespace {

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join(const std::string& dir, const std::string& rest) {
  if (dir.empty()) return rest;
  if (!rest.empty() && rest[0] == '/') return dir + rest;
  return dir.back() == '/' ? dir + rest : dir + "/" + rest;
}

// "93ac61..." -> ".build-id/93/ac61....debug", the layout of /usr/lib/debug.
std::string build_id_path(const std::string& build_id) {
  return ".build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug";
}

// The directories a module's debuglink is looked up in: the module's own
// folder both as named and after resolving symlinks (/lib -> /usr/lib), so
// that a report naming either finds the same files.
std::vector<std::string> module_dirs(const std::string& module_path) {
  std::vector<std::string> dirs{dir_of(module_path)};
  if (char* real = realpath(module_path.c_str(), nullptr)) {
    std::string d = dir_of(real);
    free(real);
    if (d != dirs[0]) dirs.push_back(d);
  }
  return dirs;
}

enum class Proof { kBuildIdOrCrc, kBuildIdOnly };

// Opens `path` and keeps it when it is a debug file of the requested module:
// same build-id (when one is known), else the debuglink CRC for debuglink
// candidates, and it must carry DWARF that libdw accepts. Candidates that do
// not exist are skipped silently (most of them never do).
bool try_candidate(const std::string& path, const SearchRequest& req, Proof proof,
                   DebugSource source, DebugFile* out, std::vector<std::string>* notes) {
  if (access(path.c_str(), F_OK) != 0) return false;
  std::string error;
  auto file = ElfFile::open(path, &error);
  if (!file) {
    notes->push_back(error);
    return false;
  }
  if (req.main && file->same_file(*req.main)) return false;
  if (!req.build_id.empty()) {
    if (file->build_id() != req.build_id) {
      notes->push_back(path + ": build-id " +
                       (file->build_id().empty() ? "none" : file->build_id()) + ", expected " +
                       req.build_id + "; not used");
      return false;
    }
  } else if (proof == Proof::kBuildIdOrCrc && req.main && !req.main->debuglink().empty()) {
    uint32_t crc = 0;
    if (!file->crc32(&crc) || crc != req.main->debuglink_crc()) {
      notes->push_back(path + ": CRC does not match the module's .gnu_debuglink; not used");
      return false;
    }
  }
  if (!file->has_dwarf()) {
    notes->push_back(path + ": has no DWARF");
    return false;
  }
  Dwarf* dwarf = dwarf_begin_elf(file->elf(), DWARF_C_READ, nullptr);
  if (dwarf == nullptr) {
    notes->push_back(path + ": unreadable DWARF (" + dwarf_errmsg(-1) + ")");
    return false;
  }
  out->file = std::move(file);
  out->dwarf = dwarf;
  out->source = source;
  return true;
}

// Asks the servers in DEBUGINFOD_URLS for the debug file with this build-id,
// through the run's fetcher (debuginfod_fetch.h): within the run's network
// budget, and from what an earlier fetch of many modules at once found.
// libdebuginfod keeps a local cache (DEBUGINFOD_CACHE_PATH), so a second run
// does not download again.
bool try_debuginfod(const SearchRequest& req, const SearchOptions& options, DebugFile* out,
                    std::vector<std::string>* notes) {
  const char* urls = getenv("DEBUGINFOD_URLS");
  if (urls == nullptr || *urls == '\0' || req.build_id.empty()) return false;
  std::shared_ptr<Debuginfod> net = options.debuginfod;
  if (!net) net = std::make_shared<Debuginfod>(options.network_budget_s);
  std::string path, why;
  if (!net->result(req.build_id, &path, &why)) {
    if (net->deferring()) {
      net->defer(req.build_id);
      return false;
    }
    net->fetch({req.build_id});
    net->result(req.build_id, &path, &why);
  }
  if (path.empty()) {
    notes->push_back(why);
    return false;
  }
  return try_candidate(path, req, Proof::kBuildIdOnly, DebugSource::kDebuginfod, out, notes);
}

}  // namespace

DebugFile::DebugFile(DebugFile&& o) noexcept
    : file(std::move(o.file)), dwarf(std::exchange(o.dwarf, nullptr)), source(o.source) {}

DebugFile& DebugFile::operator=(DebugFile&& o) noexcept {
  if (this != &o) {
    if (dwarf) dwarf_end(dwarf);
    dwarf = std::exchange(o.dwarf, nullptr);
    file = std::move(o.file);
    source = o.source;
  }
  return *this;
}

DebugFile::~DebugFile() {
  // The Dwarf reads from the file's Elf: end it first.
  if (dwarf) dwarf_end(dwarf);
}

DebugFile find_separate_debug(const SearchRequest& req, const SearchOptions& options,
                              std::vector<std::string>* notes) {
  DebugFile out;
  const std::string& root = options.system_debug_root;
  const std::string link = req.main ? req.main->debuglink() : std::string();
  const auto dirs = module_dirs(req.module_path);

  // 1. .gnu_debuglink, where GDB looks for it.
  if (!link.empty() && link.find('/') == std::string::npos) {
    for (const auto& dir : dirs) {
      for (const std::string& c :
           {join(dir, link), join(dir, ".debug/" + link), join(join(root, dir), link)}) {
        if (try_candidate(c, req, Proof::kBuildIdOrCrc, DebugSource::kDebuglink, &out, notes))
          return out;
      }
    }
  }
  // 2. The debug root's build-id tree (Debian's -dbg/-dbgsym packages).
  if (req.build_id.size() > 2) {
    if (try_candidate(join(root, build_id_path(req.build_id)), req, Proof::kBuildIdOnly,
                      DebugSource::kBuildIdDir, &out, notes))
      return out;
  }
  // 3. --debug-dir: a build-id tree, a debuglink name, a mirror of the
  //    module's path, or a file named after the module.
  const std::string base = base_of(req.module_path);
  for (const auto& d : options.debug_dirs) {
    std::vector<std::string> candidates;
    if (req.build_id.size() > 2) candidates.push_back(join(d, build_id_path(req.build_id)));
    if (!link.empty() && link.find('/') == std::string::npos) {
      candidates.push_back(join(d, link));
      for (const auto& dir : dirs) candidates.push_back(join(join(d, dir), link));
    }
    candidates.push_back(join(d, base + ".debug"));
    candidates.push_back(join(d, base));
    for (const auto& c : candidates) {
      if (try_candidate(c, req, Proof::kBuildIdOrCrc, DebugSource::kDebugDir, &out, notes))
        return out;
    }
  }
  // 4. debuginfod.
  if (options.use_debuginfod && try_debuginfod(req, options, &out, notes)) return out;
  return out;
}

DebugFile find_alt_debug(const std::string& debug_file_path, const std::string& alt_name,
                         const std::string& alt_build_id, const SearchOptions& options) {
  DebugFile out;
  std::vector<std::string> ignored;
  SearchRequest req;
  req.build_id = alt_build_id;
  std::vector<std::string> candidates;
  if (!alt_name.empty()) {
    candidates.push_back(alt_name[0] == '/' ? alt_name : join(dir_of(debug_file_path), alt_name));
  }
  if (alt_build_id.size() > 2) {
    candidates.push_back(join(options.system_debug_root, build_id_path(alt_build_id)));
    for (const auto& d : options.debug_dirs)
      candidates.push_back(join(d, build_id_path(alt_build_id)));
  }
  for (const auto& c : candidates) {
    if (try_candidate(c, req, Proof::kBuildIdOnly, DebugSource::kDebugDir, &out, &ignored)) break;
  }
  return out;
}

}  // namespace faultline::symbolize::internal
