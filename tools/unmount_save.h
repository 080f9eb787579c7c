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
// With `check_busy`, a group with a path that is busy (tools/mount_holders.h: a file open below
// it, a working directory, a mount below it) is neither saved nor unmounted: it is reported with
// its holders and stays as it was, because the unmount that follows the save would fail anyway.
#pragma once

#include <string>
#include <vector>

namespace lazycache::cli {

struct UnmountSaveResult {
  int exit_code = 0;
  std::vector<std::string> keep_mounted;  // save failed or busy: do not unmount these
  std::vector<std::string> done;          // saved or skipped: clean up after unmount
};

// Prints one line per group to stdout (errors to stderr). Blocking.
UnmountSaveResult save_before_unmount(const std::vector<std::string>& paths, bool check_busy);
// After the daemons have exited: removes the overlay state and save records of `done` paths.
// Only for paths that were really unmounted (or never were mounts): under a live mount the
// upper directory is the job's changes and the record is what a retry needs.
void clean_after_save(const std::vector<std::string>& done);

}  // namespace lazycache::cli
