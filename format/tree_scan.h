// SPDX-License-Identifier: MIT
// File: format/tree_scan.h -- the first stage of packing: normalise the roots and lstat the
// trees into an IndexModel (names sorted bytewise, no file data read yet).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/archive_writer.h"
#include "format/index_builder.h"

namespace lazycache::format {

struct NormalizedRoot {
  std::string original_path;  // absolute, lexically normalised
  std::string member_prefix;  // relative, no "." components, no trailing '/'
};

// Applies the PackRoot rules (archive_writer.h). `cwd` resolves relative paths.
// Errors: kInvalidArgument naming the offending path.
Result<std::vector<NormalizedRoot>> normalize_roots(const std::vector<PackRoot>& roots, const std::string& cwd);

struct ScannedTree {
  IndexModel model;                                    // nodes and roots filled; frames/hot/totals not yet
  std::vector<int32_t> node_root;                      // per node: which root's tree it is in (-1: top or implicit)
  std::vector<std::pair<uint64_t, uint64_t>> dev_ino;  // per node (regular files), for hardlinks
  std::vector<uint64_t> stat_nlink;                    // per node
  // Per node, or empty: where to read a regular file's data instead of at its place under its
  // root (a writable mount's file in upper/, the same bytes the mount serves: fs/overlay_tree.h).
  // Used only while the file found there is the one scanned (dev_ino); else the root's path.
  std::vector<std::string> read_at;
  uint64_t skipped = 0;
};

// Scans the trees. Sockets, devices and fifos are skipped with a warning.
// Errors: kNotFound (a root is missing), kIo / kPermissionDenied naming the path.
Result<ScannedTree> scan_tree(const std::vector<NormalizedRoot>& roots, XattrSet xattrs,
                              const std::function<void(const std::string&)>& warn);

// The implicit ancestor directories of root `r` (every component of its member prefix but the
// last), shared between roots, with the metadata of the directories holding its path on disk:
// missing ones are added with add(node, parent). Returns the node the root goes under. Errors:
// kInvalidArgument when `r` lies inside another root already in `t`.
Result<uint32_t> add_implicit_ancestors(ScannedTree& t, const NormalizedRoot& r, const std::function<uint32_t(IndexNode, uint32_t)>& add);

// Reads the xattrs of `set` (archive_writer.h) of an open fd, sorted by name.
Result<std::vector<Xattr>> read_xattrs(int fd, const std::string& what, XattrSet set = XattrSet::kStored);
// The same for the file at `path`, not following a final symlink (l*xattr), without opening it.
// `what` names the file in errors.
Result<std::vector<Xattr>> read_xattrs_at(const std::string& path, const std::string& what, XattrSet set);

}  // namespace lazycache::format
