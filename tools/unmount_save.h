// SPDX-License-Identifier: MIT
// File: tools/unmount_save.h -- `unmount --save`: save what the job left under mount points
// before they go away, under the primary key `mount` recorded (tools/save_record.h).
//
// Per group of paths mounted from one entry (same key, scope and store):
//  - exact hit and nothing changed (the overlay's upper/ is empty): skipped, with a message;
//  - otherwise the merged view (archive + changes) is saved under the primary key, create-only
//    (an existing key is skipped: entries are immutable), with the files the job read, in
//    first-read order, as the archive's hot list. Incrementally when the paths were mounted
//    from an entry (tools/incremental_save.h): frames of unchanged files are copied from the
//    chunk cache or the store, only new and changed files are read through the mount and
//    compressed; if the base cannot be used, the whole view is packed through the mount;
//  - a miss (the path was left a plain directory) saves the directory.
// A failed save leaves the group mounted and says where its changes are, so nothing is lost.
#pragma once

#include <string>
#include <vector>

namespace lazycache::cli {

struct UnmountSaveResult {
  int exit_code = 0;
  std::vector<std::string> keep_mounted;  // save failed: do not unmount these
  std::vector<std::string> done;          // saved or skipped: clean up after unmount
};

// Prints one line per group to stdout (errors to stderr). Blocking.
UnmountSaveResult save_before_unmount(const std::vector<std::string>& paths);
// After the daemons have exited: removes the overlay state and save records of `done` paths.
void clean_after_save(const std::vector<std::string>& done);

}  // namespace lazycache::cli
