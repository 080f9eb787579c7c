// SPDX-License-Identifier: MIT
// File: common/posix_files.h -- the POSIX file helpers every layer uses: an owning descriptor,
// write_all, mkdir -p, whole-file read, create-new and atomic replace, directory listing.
// All blocking; thread-safe (no shared state but an atomic counter for temp names). Errors carry
// the path and errno (kIo, kNotFound, kPermissionDenied; errno_status in common/status.h).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/byte_buffer.h"
#include "common/status.h"

namespace lazycache {

// Owns one file descriptor and closes it once (close errors are ignored: callers that care
// about a close error, e.g. after writing, call release() and close it themselves).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Writes all of `bytes` to `fd` (retrying short writes and EINTR). `what` names the target in
// the error ("write /path", "writing to stdout").
Status write_all(int fd, std::string_view bytes, const std::string& what);

// mkdir -p with mode 0755; kIo (ENOTDIR) when `path` exists but is not a directory.
Status make_dirs(const std::string& path);
Result<std::string> real_path(const std::string& path);
// The whole file, refusing files larger than max_bytes (kCorrupt).
Result<std::string> read_whole_file(const std::string& path, size_t max_bytes);
// The same into a ByteBuffer (no clearing; large files populated in one call, common/byte_buffer.h):
// for blobs of megabytes read on a hot path (the chunk cache).
Result<ByteBuffer> read_whole_file_bytes(const std::string& path, size_t max_bytes);
// Creates `path` (which must not exist) with `mode` (less the umask) and writes `bytes`; on
// failure removes what it wrote.
Status write_new_file(const std::string& path, std::span<const std::byte> bytes, mode_t mode = 0644);
// Writes PATH.tmp.<pid>.<n> (n unique in the process; created with `mode`) and renames it over
// `path`: readers see the old or the new content, never a mix, even when several threads
// replace the same file at once (the last rename wins), and the file never has a wider mode
// than `mode`. A crash can leave one PATH.tmp.* behind, never a torn PATH.
Status replace_file(const std::string& path, std::string_view content, mode_t mode = 0644);
// A name for a temporary next to `path`, unique among all threads of this process:
// PATH.tmp.<pid>.<n>.
std::string unique_temp_name(const std::string& path);
// Names in a directory except "." and ".."; empty if it cannot be read.
std::vector<std::string> list_dir(const std::string& path);
// rm -rf of `dir` without following symlinks (at most 64 descriptors, whatever the depth); true
// when it is gone (or never existed).
bool remove_tree(const std::string& dir);

}  // namespace lazycache
