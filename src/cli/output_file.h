// Output files of the commands (`symbolize -o`, `--in-place`): written the
// way a user who names one means, never replacing what is not a file.
#pragma once

#include <string>

namespace faultline::cli {

// Writes all of `data` to the descriptor; false with errno set if it could not.
bool write_all_fd(int fd, const std::string& data);

// Writes `data` to `path`:
// - "-", /dev/stdout, /dev/stderr, /dev/fd/N: to that descriptor itself;
// - a device, a FIFO, a socket: written through, never replaced;
// - a symbolic link: written through where it is the caller's (or root's)
//   and leads to one of those; refused otherwise (a rename would replace
//   the link, and writing through another user's link could reach any file);
// - a regular file or a new name: a temporary file in the same folder,
//   renamed over it once whole, so a reader never sees half of it; the mode
//   of the file it replaces is kept.
// On failure false, with a message for the user in *why.
bool write_output_file(const std::string& path, const std::string& data, std::string* why);

}  // namespace faultline::cli
