// SPDX-License-Identifier: MIT
// File: format/dir_stack.h -- DirStack: directory descriptors along the current path of a
// depth-first walk below one base directory, so opening the parent of the next entry costs one
// openat (not one per path component: that made deep extractions O(depth^2)).
//
// Every directory is opened relative to its parent's descriptor with O_NOFOLLOW | O_DIRECTORY
// (open_dir_below), so a symlink on disk is never followed, exactly as a walk from the base.
// Descriptors stay bounded: the deepest kWindow levels are held, and above them only every
// kWindow-th level (a checkpoint), so at most about 2 * kWindow + depth / kWindow are open; a
// jump back above the window reopens at most kWindow - 1 levels from the nearest checkpoint.
// The tree is either an Index (extraction) or any parent/name view (packing walks the scanned
// IndexModel with the same stack: format/file_data.h, format/tree_scan.cpp).
// Not thread-safe. Borrows the base descriptor and the index or view.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "format/archive.h"
#include "format/fs_util.h"

namespace lazycache::format {

class DirStack {
 public:
  static constexpr size_t kWindow = 64;
  // Names the entry in errors; called only on failure (building a deep path costs O(depth)).
  using Describe = std::function<std::string()>;
  // A tree as parent links and names. `parent(root) == root`; the functions are called with ids
  // below `top` only, and must stay valid (and their answers unchanged) until the next reset.
  struct Tree {
    std::function<EntryId(EntryId)> parent;
    std::function<std::string(EntryId)> name;
    EntryId root = 0;
  };

  // Starts over at `base_fd`, the directory that is entry `top` on disk.
  void reset(const Index* index, int base_fd, EntryId top);
  void reset(Tree tree, int base_fd, EntryId top);
  // Descriptor of directory entry `dir` (`top` itself or a directory below it), valid until the
  // next call. `what` names the entry in errors (kPermissionDenied for a symlink or
  // non-directory on the way, kNotFound, kIo).
  Result<int> open(EntryId dir, const Describe& what);
  // The same descriptor, shared: it stays open while the caller holds it, after the walk has
  // moved on (the file writers' batches in that directory), with no dup(2) per directory. For
  // `top`, a duplicate of the borrowed base, made once per reset.
  Result<std::shared_ptr<const Fd>> open_shared(EntryId dir, const Describe& what);
  // With `create`, a directory missing on the way is made (relative to its parent's descriptor,
  // like the walk) before it is opened: extraction into a staged target creates each directory
  // just before its first entry, as tar does (ext4 allocates inodes faster that way than for all
  // directories first, then all files). Until the next reset.
  // `exists` (optional) says a directory is known to be there already (format/dirs_ahead.h made
  // it): its mkdirat is skipped. `mode` (optional; default 0700 for all) gives the mode to make
  // a directory with (the umask applies), so that the extractor need not fchmod it afterwards.
  void set_create_missing(bool create, std::function<bool(EntryId)> exists = {}, std::function<mode_t(EntryId)> mode = {}) {
    create_missing_ = create;
    exists_ = std::move(exists);
    mode_ = std::move(mode);
  }

  size_t open_descriptors() const;
  uint64_t openat_calls() const { return openat_calls_; }

 private:
  struct Level {
    EntryId id = 0;
    // Null when dropped (only ever above the window and off the checkpoints); shared with the
    // holders of open_shared(). levels_[0]'s is the base's duplicate, made by open_shared().
    std::shared_ptr<const Fd> fd;
    bool valid() const { return fd != nullptr; }
  };
  int fd_at(size_t level) const { return level == 0 ? base_fd_ : levels_[level].fd->get(); }
  Status reopen(size_t level, const Describe& what);
  Status push(EntryId id, const Describe& what);
  void truncate(size_t size);

  Tree tree_;
  bool ready_ = false;
  bool create_missing_ = false;
  std::function<bool(EntryId)> exists_;
  std::function<mode_t(EntryId)> mode_;
  int base_fd_ = -1;
  std::vector<Level> levels_;                     // levels_[0] is `top` (its fd: base_fd_)
  std::unordered_map<EntryId, size_t> level_of_;  // entry -> its index in levels_
  uint64_t openat_calls_ = 0;
};

}  // namespace lazycache::format
