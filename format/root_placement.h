// SPDX-License-Identifier: MIT
// File: format/root_placement.h -- where each root of an archive goes for a list of PATHs given
// on the command line. One rule for `mount` and `restore --extract`, so a PATH that mounts also
// restores (and to the same place).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "format/archive.h"

namespace lazycache::format {

struct RootPlacement {
  std::string path;  // absolute destination (mount point or extraction target)
  EntryId root = 0;  // the root's entry
};

// `paths` are absolute and normalised. With none, every root goes back to where it was saved.
// Each PATH equal to a root's original path takes that root; when some PATH matches none and
// the counts agree, the PATHs take the roots in the order they were saved (restoring an entry
// somewhere else). Errors: kInvalidArgument listing the saved paths.
Result<std::vector<RootPlacement>> place_roots(const Index& index, const std::vector<std::string>& paths);

}  // namespace lazycache::format
