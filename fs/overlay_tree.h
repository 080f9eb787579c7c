// SPDX-License-Identifier: MIT
// File: fs/overlay_tree.h -- the merged view of writable mounts as a format::ScannedTree, built
// from the base index and the overlays' upper/ directories (whiteouts, opaque markers, upper
// entries), without a walk of the mount. For `unmount --save`: on the node fixture (22,848
// entries) the scan of the mount through FUSE was nearly all of an incremental save's time.
//
// The tree is the one format::scan_for_pack would find through the mounts: the same nodes in the
// same order, with the attributes the overlay reports (fs/overlay.cpp: an upper entry's lstat and
// xattrs; otherwise the archive entry's, symlinks as mode 0777, the mount's owner override), and
// hardlink groups by inode (upper inodes; an archive group per mount, with the number of its
// names still visible there as the link count). Files are still read through the mount points
// (ScannedTree::model.roots keep them as original paths), so only the changed ones cost FUSE reads.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "format/archive.h"
#include "format/archive_writer.h"
#include "format/tree_scan.h"

namespace lazycache::fs {

// One writable mount of the base.
struct OverlayTreeRoot {
  std::string mount_path;          // absolute mount point
  std::string member;              // the member prefix the new archive gives it
  format::EntryId lower_root = 0;  // the base directory entry mounted there
  std::string upper_dir;           // its overlay's upper/ (fs/overlay.h)
};

struct OverlayTreeOptions {
  format::XattrSet xattrs = format::XattrSet::kNone;
  // The mount's FilesystemConfig::owner: archive entries are reported with this owner.
  std::optional<std::pair<uint32_t, uint32_t>> owner;
  std::function<void(const std::string&)> warn;  // skipped entries, as scan_tree warns
};

// The merged tree of `roots` (children sorted bytewise). Reads only upper/ and `base`.
// Errors: kInvalidArgument (bad or overlapping roots, a root that is not a base directory),
// kIo naming the upper path that could not be read.
Result<format::ScannedTree> merged_overlay_tree(const format::Index& base, const std::vector<OverlayTreeRoot>& roots,
                                                const OverlayTreeOptions& options);

// "" when `a` and `b` describe the same tree for packing (nodes, order, attributes, xattrs,
// roots, hardlink groups); else the first difference, naming the path. For the cross-check
// LAZYCACHE_SAVE_CROSSCHECK=1 (tools/incremental_save.cpp) that tests run with.
// `b_may_split_links`: `b` is a scan of a kernel overlay (tools/kernel_overlay.h), which reports
// the names of a copied-up archive file that the job hardlinked with different inode numbers
// (overlayfs keeps the archive's number for the first name; index=off): b's hardlink groups may
// split a's, never join two of them.
std::string scanned_tree_difference(const format::ScannedTree& a, const format::ScannedTree& b, bool b_may_split_links = false);

}  // namespace lazycache::fs
