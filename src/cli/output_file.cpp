#include "cli/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

namespace faultline::cli {
namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

// The descriptor a path names by itself ("-", /dev/stdout, /dev/fd/2...),
// or -1.
int named_descriptor(const std::string& path) {
  if (path == "-" || path == "/dev/stdout" || path == "/proc/self/fd/1") return STDOUT_FILENO;
  if (path == "/dev/stderr" || path == "/proc/self/fd/2") return STDERR_FILENO;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const size_t n = std::strlen(prefix);
    if (path.compare(0, n, prefix) != 0 || path.size() == n || path.size() > n + 6) continue;
    int fd = 0;
    for (size_t i = n; i < path.size(); ++i) {
      if (path[i] < '0' || path[i] > '9') return -1;
      fd = fd * 10 + (path[i] - '0');
    }
    return fd;
  }
  return -1;
}

bool write_to_descriptor(int fd, const std::string& path, const std::string& data,
                         std::string* why) {
  if (write_all_fd(fd, data)) return true;
  *why = "cannot write " + path + ": " + errno_text(errno);
  return false;
}

// Opens what is not a regular file and writes to it: no O_TRUNC (a FIFO or
// a device has nothing to cut), no O_CREAT (it exists), and no regular file
// that took its place in between.
bool write_through(const std::string& path, bool follow, const std::string& data,
                   std::string* why) {
  int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY | (follow ? 0 : O_NOFOLLOW);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    *why = "cannot open " + path + ": " + errno_text(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
    ::close(fd);
    *why = path + " changed while it was opened; not written";
    return false;
  }
  bool ok = write_to_descriptor(fd, path, data, why);
  if (::close(fd) != 0 && ok && errno != EINTR) {
    *why = "cannot write " + path + ": " + errno_text(errno);
    ok = false;
  }
  return ok;
}

// A new file beside `path` under a random name that nothing else uses.
int open_temporary(const std::string& path, mode_t mode, std::string* tmp) {
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".tmp-%08x%08x", rd(), rd());
    *tmp = path + suffix;
    int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

bool replace_atomically(const std::string& path, mode_t mode, const std::string& data,
                        std::string* why) {
  std::string tmp;
  int fd = open_temporary(path, mode, &tmp);
  if (fd < 0) {
    *why = "cannot create a temporary file beside " + path + ": " + errno_text(errno);
    return false;
  }
  // The mode asked for, whatever the umask (the file it replaces had it).
  bool ok = ::fchmod(fd, mode) == 0 && write_all_fd(fd, data) && ::fsync(fd) == 0;
  int saved = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) saved = errno;
    ::unlink(tmp.c_str());
    *why = "cannot write " + path + ": " + errno_text(saved);
    return false;
  }
  return true;
}

}  // namespace

bool write_all_fd(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool write_output_file(const std::string& path, const std::string& data, std::string* why) {
  if (path.empty()) {
    *why = "an empty output path";
    return false;
  }
  int named = named_descriptor(path);
  if (named >= 0) return write_to_descriptor(named, path, data, why);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      *why = "cannot write " + path + ": " + errno_text(errno);
      return false;
    }
    mode_t mask = ::umask(0);
    ::umask(mask);
    return replace_atomically(path, 0644 & ~mask, data, why);
  }
  if (S_ISREG(st.st_mode)) return replace_atomically(path, st.st_mode & 07777, data, why);
  if (S_ISDIR(st.st_mode)) {
    *why = "cannot write " + path + ": it is a directory";
    return false;
  }
  if (!S_ISLNK(st.st_mode)) return write_through(path, /*follow=*/false, data, why);
  // A link: written through only where its owner is trusted and it leads
  // to something that is not a file (a user's link to a terminal, a FIFO).
  struct stat target;
  const bool trusted = st.st_uid == ::geteuid() || st.st_uid == 0;
  if (trusted && ::stat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode) &&
      !S_ISDIR(target.st_mode)) {
    return write_through(path, /*follow=*/true, data, why);
  }
  *why = path + " is a symbolic link" + (trusted ? "" : " of another user") +
         "; refusing to write through or replace it (name the file it leads to)";
  return false;
}

}  // namespace faultline::cli
