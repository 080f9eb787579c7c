// SPDX-License-Identifier: MIT
// File: format/file_data.h -- reading a scanned tree's files into tar frames, shared by
// write_archive and the incremental writer so both cut frames and hash content the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "format/archive.h"
#include "format/dir_stack.h"
#include "format/fs_util.h"
#include "format/tree_scan.h"

namespace lazycache::format {

// Opens regular files of a ScannedTree read-only, one path component at a time below their root
// with O_NOFOLLOW (a symlink swapped in after the scan is refused, not followed). The directories
// on the way are held by a DirStack (format/dir_stack.h): a file next to the previous one costs
// one openat, a file elsewhere one openat per directory between the two (not one per level from
// the root: deep trees used to pack in O(depth^2) openat), and at most about
// 2 * DirStack::kWindow + depth / kWindow descriptors stay open, whatever the tree's size.
// Not thread-safe; `tree` must outlive it (its nodes may not change while it is used).
class TreeFileOpener {
 public:
  explicit TreeFileOpener(const ScannedTree& tree) : tree_(tree) {}
  // `what` names the file in errors. Errors: kNotFound, kPermissionDenied, kIo.
  Result<Fd> open(uint32_t node, const std::string& what);

 private:
  const ScannedTree& tree_;
  int32_t root_ = -1;  // the root whose directory root_dir_ holds
  Fd root_dir_;
  DirStack dirs_;
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
Result<FileData> append_file_data(int fd, uint64_t size, uint64_t target, std::string& frame, const std::function<Status()>& flush,
                                  const std::function<void(uint64_t)>& consumed, const std::string& what);

}  // namespace lazycache::format
