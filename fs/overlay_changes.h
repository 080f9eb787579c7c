// SPDX-License-Identifier: MIT
// File: fs/overlay_changes.h -- what an Overlay's upper layer says changed, read from disk
// (fs/overlay.h describes the layout). For incremental save: everything listed here may differ
// from the archive, everything else under the mount is the archive's own bytes.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace lazycache::fs {

// Relative paths ("a/b/c") of every non-directory entry in `upper_dir` (files and symlinks the
// job created, copied up, rewrote or linked), sorted, without whiteout and opaque markers
// (".wh.*", and a kernel overlayfs's 0/0 character devices: deletions show in the merged view
// itself). Directories are not listed: their
// metadata is visible in the merged view, and their children are listed one by one.
// `moved_dirs`, if given, gets the relative paths of the directories a kernel overlayfs moved
// (renamed) from elsewhere in the archive (trusted.overlay.redirect), sorted: below them, archive
// files show under new paths, so everything of the archive at those paths may differ too.
// Does not follow symlinks; holds one descriptor per directory level. Errors: kIo naming the path.
Result<std::vector<std::string>> list_upper_changes(const std::string& upper_dir, std::vector<std::string>* moved_dirs = nullptr);

}  // namespace lazycache::fs
