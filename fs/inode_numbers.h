// SPDX-License-Identifier: MIT
// File: fs/inode_numbers.h -- InodeNumbers: the one rule that turns archive entry ids into the
// inode numbers a mount hands the kernel, and back. FUSE-free. The read-only op table
// (fs/fuse_adapter.cpp) and the writable overlay (fs/overlay.h) both number entries with it, so
// an archive file has the same number in either kind of mount, and keeps it after a copy-up.
//
// The rule: the entry served as the mount's top is kRootInode (1, libfuse's FUSE_ROOT_ID); any
// other entry id N is N + 2 (0 is no inode for the kernel and 1 is the root, so N + 1 would give
// entry 0 the root's number). Numbers from first_free() on belong to no archive entry: the
// overlay gives them to files created in the mount. Hardlinked names: callers pass the group's
// canonical id (Filesystem::canonical), so every name of a group has one number.
// Pure value type: no I/O, no state beyond the two ids; thread-safe.
#pragma once

#include <cstdint>

#include "format/archive.h"

namespace lazycache::fs {

class InodeNumbers {
 public:
  static constexpr uint64_t kRootInode = 1;

  // `root`: the entry shown as the mount's top; `entry_count`: the index's (ids are below it).
  constexpr InodeNumbers(format::EntryId root, format::EntryId entry_count) : root_(root), entry_count_(entry_count) {}

  constexpr uint64_t inode(format::EntryId id) const { return id == root_ ? kRootInode : static_cast<uint64_t>(id) + 2; }

  // The entry behind `ino`. A number that names no entry maps to entry_count (one past the last
  // id), which every Filesystem call rejects with kNotFound, so callers need no check of their own.
  constexpr format::EntryId entry(uint64_t ino) const {
    if (ino == kRootInode) return root_;
    return ino >= 2 && ino - 2 < entry_count_ ? static_cast<format::EntryId>(ino - 2) : entry_count_;
  }

  // The first number that no archive entry has.
  constexpr uint64_t first_free() const { return static_cast<uint64_t>(entry_count_) + 2; }

  constexpr format::EntryId root() const { return root_; }

 private:
  format::EntryId root_;
  format::EntryId entry_count_;
};

}  // namespace lazycache::fs
