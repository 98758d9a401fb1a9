#include "install/dump_helper.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/str.h"
#include "core/signal/helper_dump.h"

namespace faultline::core {
namespace {

bool executable(const char* path) {
  struct stat st;
  return path && path[0] == '/' && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
         access(path, X_OK) == 0;
}

// FAULTLINE_CLI, else `faultline` beside the library: DIR/../bin (a build
// tree, the Python package's bundle, PREFIX/lib), DIR/../../bin
// (PREFIX/lib/<multiarch>), DIR itself. Sets the command, or says why there
// is none, in the crash path's helper (helper_dump.h).
void find_cli() {
  const char* off = secure_getenv("FAULTLINE_DUMP_HELPER");
  if (off && str_eq(off, "0")) return helper_dump_set_command(nullptr, "FAULTLINE_DUMP_HELPER=0");
  if (getauxval(AT_SECURE)) {
    return helper_dump_set_command(nullptr,
                                   "a setuid or file-capability program, which cannot be traced");
  }
  if (const char* cli = secure_getenv("FAULTLINE_CLI"); cli && cli[0]) {
    if (executable(cli) && str_len(cli) < PATH_MAX) return helper_dump_set_command(cli, nullptr);
    return helper_dump_set_command(
        nullptr, "FAULTLINE_CLI is not an executable file named by an absolute path");
  }
  Dl_info info;
  char lib[PATH_MAX];
  if (dladdr(reinterpret_cast<void*>(&find_cli), &info) == 0 || !info.dli_fname ||
      !realpath(info.dli_fname, lib)) {
    return helper_dump_set_command(
        nullptr, "the library's own file was not found, and FAULTLINE_CLI is not set");
  }
  char* slash = strrchr(lib, '/');
  if (slash) *slash = '\0';
  static const char* const kBeside[] = {"/../bin/faultline", "/../../bin/faultline", "/faultline"};
  for (const char* rel : kBeside) {
    char cli[PATH_MAX];
    StrBuf b(cli, sizeof cli);
    b.add(lib).add(rel);
    char real[PATH_MAX];
    if (executable(cli) && realpath(cli, real)) return helper_dump_set_command(real, nullptr);
  }
  helper_dump_set_command(
      nullptr, "no `faultline` command beside the library, and FAULTLINE_CLI is not set");
}

}  // namespace

void prepare_dump_helper() {
  if (!helper_dump_command_known()) find_cli();
}

bool dump_by_helper(char* why, size_t why_size) {
  prepare_dump_helper();
  return helper_dump(why, why_size, nullptr, /*in_handler=*/false);
}

}  // namespace faultline::core
