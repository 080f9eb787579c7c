// SPDX-License-Identifier: MIT
// File: format/file_data.h -- reading a scanned tree's files into tar frames, shared by
// write_archive and the incremental writer so both cut frames and hash content the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "format/archive.h"
#include "format/fs_util.h"
#include "format/tree_scan.h"

namespace lazycache::format {

// Opens regular files of a ScannedTree read-only, one path component at a time below their root
// with O_NOFOLLOW (a symlink swapped in after the scan is refused, not followed). Keeps the
// last parent directory open, so files of one directory cost one openat each.
// Not thread-safe; `tree` must outlive it.
class TreeFileOpener {
 public:
  explicit TreeFileOpener(const ScannedTree& tree) : tree_(tree) {}
  // `what` names the file in errors. Errors: kNotFound, kPermissionDenied, kIo.
  Result<Fd> open(uint32_t node, const std::string& what);

 private:
  const ScannedTree& tree_;
  Fd dir_;
  uint32_t dir_node_ = UINT32_MAX;
};

struct FileData {
  Digest128 digest;           // XXH3-128 of the `size` bytes stored
  bool size_changed = false;  // the file was shorter (zero-padded) or longer than `size`
};

// Appends exactly `size` bytes of `fd` (then no padding: the caller adds the tar padding) to
// `frame`, the frame being filled, by write_archive's cutting rule: when `frame` has reached
// `target` and at least a quarter frame of the file remains, `flush` is called first (it must
// leave `frame` empty). `consumed` is told the size of every piece appended.
// A file that shrank since the scan is zero-padded so the stream stays valid.
// Errors: kIo naming `what`, and flush's.
Result<FileData> append_file_data(int fd, uint64_t size, uint64_t target, std::string& frame,
                                  const std::function<Status()>& flush, const std::function<void(uint64_t)>& consumed,
                                  const std::string& what);

}  // namespace lazycache::format
