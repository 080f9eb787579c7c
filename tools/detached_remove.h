// SPDX-License-Identifier: MIT
// File: tools/detached_remove.h -- removing a directory tree without waiting for it, for the
// state a saved writable mount leaves (its upper/ and work/ directories).
//
// Why: `unmount --save` removed the overlay state after the save and the unmount, on the
// command's own time (nftw over upper/ and work/: tens of ms on a loaded runner, more with many
// changed files), though nothing waits for it: the save line is printed, the entry published.
#pragma once

#include <string>

namespace lazycache::cli {

// Removes `dir` in the background: it is first renamed to a hidden sibling
// (".NAME.removing-PID": atomic, so nothing finds it under its name once this returns), then
// removed by `rm -rf` in a detached grandchild process (no zombie left to this process, which
// may be a long-lived test binary). Falls back to removing it here when the rename or the fork
// fails. True when `dir` is gone from its name (false: errno says why, as remove_tree()).
bool remove_tree_detached(const std::string& dir);

}  // namespace lazycache::cli
