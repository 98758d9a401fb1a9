#include "cli/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "cli/output_file.h"

namespace faultline::cli::upload {

namespace {

bool trusted_owner(uid_t uid) {
  return uid == ::geteuid() || uid == 0;
}

}  // namespace

SpoolDir::~SpoolDir() {
  if (fd_ >= 0) ::close(fd_);
}

bool SpoolDir::open(const std::string& path, bool create, std::string* why) {
  path_ = path;
  if (create) {
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      *why = fmt::format("spool {}: cannot make it: {}", path, std::strerror(errno));
      return false;
    }
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) {
    int e = errno;
    struct stat st;
    bool link = ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
    *why = link ? fmt::format("spool {}: a symbolic link; refused (name the folder itself)", path)
                : fmt::format("spool {}: {}", path, std::strerror(e));
    return false;
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    *why = fmt::format("spool {}: {}", path, std::strerror(errno));
    return false;
  }
  if (!trusted_owner(st.st_uid)) {
    *why = fmt::format(
        "spool {}: owned by uid {}, not by this user (uid {}) or root; refused (another user "
        "may have made it to have reports written where they choose)",
        path, st.st_uid, ::geteuid());
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    *why = fmt::format(
        "spool {}: writable by other users (mode {:o}) without the sticky bit; refused "
        "(chmod go-w or +t)",
        path, st.st_mode & 07777);
    return false;
  }
  return true;
}

bool SpoolDir::has(const std::string& name) const {
  struct stat st;
  return ::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         trusted_owner(st.st_uid);
}

bool SpoolDir::read(const std::string& name, std::string* data, std::string* why,
                    size_t cap) const {
  int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = fmt::format("{}/{}: {}", path_, name, std::strerror(errno));
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !trusted_owner(st.st_uid)) {
    ::close(fd);
    *why = fmt::format("{}/{}: not a file of this user or root; ignored", path_, name);
    return false;
  }
  data->clear();
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = fmt::format("{}/{}: {}", path_, name, std::strerror(errno));
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    if (data->size() + static_cast<size_t>(n) > cap) {
      *why = fmt::format("{}/{}: larger than {} bytes", path_, name, cap);
      ::close(fd);
      return false;
    }
    data->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

bool SpoolDir::write(const std::string& name, const std::string& data, std::string* why) const {
  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = fmt::format(".{}.tmp-{:08x}{:08x}", name, rd(), rd());
    fd = ::openat(fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    *why = fmt::format("cannot write {}/{}: {}", path_, tmp, std::strerror(errno));
    return false;
  }
  bool ok = write_all_fd(fd, data) && ::fsync(fd) == 0;
  int saved = errno;
  ok = ::close(fd) == 0 && ok;
  // renameat replaces a link planted under `name`, never what it leads to.
  if (!ok || ::renameat(fd_, tmp.c_str(), fd_, name.c_str()) != 0) {
    if (ok) saved = errno;
    ::unlinkat(fd_, tmp.c_str(), 0);
    *why = fmt::format("cannot write {}/{}: {}", path_, name, std::strerror(saved));
    return false;
  }
  return true;
}

void SpoolDir::remove(const std::string& name) const {
  ::unlinkat(fd_, name.c_str(), 0);
}

std::vector<std::string> SpoolDir::stems(const std::string& suffix) const {
  std::vector<std::string> out;
  int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return out;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return out;
  }
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(n.substr(0, n.size() - suffix.size()));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace faultline::cli::upload
