// The upload spool's folder, opened once and used through its descriptor:
// a folder another user could write into (the default lies in the report
// directory, often /var/crash, writable by all) must not let them choose
// what the uploader (often root) writes or reads.
#pragma once

#include <string>
#include <vector>

namespace faultline::cli::upload {

class SpoolDir {
 public:
  SpoolDir() = default;
  ~SpoolDir();
  SpoolDir(const SpoolDir&) = delete;
  SpoolDir& operator=(const SpoolDir&) = delete;

  // Opens `path`, made (mode 0700) if missing. Refuses a link, a folder
  // owned by anyone but this user or root, and one that others may write
  // into without the sticky bit (where they could rename or remove our
  // files). False with a message in *why.
  bool open(const std::string& path, bool create, std::string* why);

  const std::string& path() const { return path_; }

  // Whether `name` is a regular file of this user or root (a link or
  // another user's file planted there counts as absent).
  bool has(const std::string& name) const;
  // Its contents (at most `cap` bytes), read without following a link;
  // false with *why on failure.
  bool read(const std::string& name, std::string* data, std::string* why,
            size_t cap = size_t{1} << 30) const;
  // Writes `name` whole: a new file under a random name (O_EXCL,
  // O_NOFOLLOW, mode 0600) renamed over it.
  bool write(const std::string& name, const std::string& data, std::string* why) const;
  void remove(const std::string& name) const;
  // The names that end with `suffix`, sorted, without it.
  std::vector<std::string> stems(const std::string& suffix) const;

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace faultline::cli::upload
