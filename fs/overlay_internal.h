// SPDX-License-Identifier: MIT
// File: fs/overlay_internal.h -- what the overlay's source files share and nobody else uses:
// error helpers, path joins, entry types, and the open-file handle. Include only from fs/overlay*.cpp.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "fs/attr_stat.h"  // to_timespec
#include "fs/overlay.h"
#include "fs/overlay_layout.h"

namespace lazycache::fs::overlay_detail {

inline Status sys_error(int err, const std::string& what) { return Status(ErrorCode::kIo, what + ": " + std::strerror(err), err); }
inline Status errno_error(const std::string& what) { return sys_error(errno, what); }

inline bool reserved(std::string_view name) { return overlay_reserved_name(name); }

inline std::string join(const std::string& dir, std::string_view name) {
  return dir.empty() ? std::string(name) : dir + "/" + std::string(name);
}

inline std::string parent_of(const std::string& rel) {
  auto slash = rel.rfind('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

inline uint32_t type_of(format::EntryType t) {
  switch (t) {
    case format::EntryType::kDirectory: return S_IFDIR;
    case format::EntryType::kSymlink: return S_IFLNK;
    case format::EntryType::kRegular: return S_IFREG;
  }
  return S_IFREG;
}

// Runs `fn`, which adds or renames an entry inside `dir`, then puts back the directory's times:
// copy-up and whiteout bookkeeping must not look like a change of the directory itself.
template <typename F>
Status keeping_dir_times(const std::string& dir, F&& fn) {
  struct stat before;
  const bool have = ::lstat(dir.c_str(), &before) == 0;
  Status s = fn();
  if (have) {
    timespec ts[2] = {before.st_atim, before.st_mtim};
    ::utimensat(AT_FDCWD, dir.c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }
  return s;
}

// The archive entry's xattrs onto its upper copy at `path` (or the open `fd`, when >= 0), best
// effort as tar does: a copy-up must not drop them, or the merged view (and the next save)
// would lose them the moment a directory gains a child or a file is written.
void copy_xattrs_up(const format::Index& index, const format::Entry& e, const std::string& path, int fd);

}  // namespace lazycache::fs::overlay_detail

namespace lazycache::fs {

// One open file. Shared: read/write/fsync keep their reference while they work without mu_,
// so a release() meanwhile only drops the table's reference and the last user closes the
// descriptor and the archive handle (no use after free whatever the kernel sends).
struct Overlay::Handle {
  explicit Handle(Filesystem& lower_fs) : lower(lower_fs) {}
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  Filesystem& lower;
  uint64_t ino = 0;
  int flags = 0;
  std::mutex mu;  // guards fd (set when a lower file is copied up under an open handle)
  int fd = -1;
  std::optional<uint64_t> lower_handle;  // released by the destructor: reads may be in flight
};

}  // namespace lazycache::fs
